"""The browser fallback's costs: added latency of a rendering, browser memory per question,
and what ``[browser] mode = "off"`` costs (nothing: no Playwright import, no process).

The world (plain http on loopback, in this process): a SearXNG-format search endpoint and,
per question, one page. Two kinds of page carry the same article: ``static`` serves it in the
HTML; ``script`` serves an empty shell whose script fetches the article as JSON and writes
it into the page after load. ``--runs`` questions (each with its own page, so no cache
helps) are answered one after another for each kind: ``static`` with the browser off,
``script`` with ``mode = "fallback"`` (the first question, which starts Chromium, is left out
and timed apart). Prints the median answer time of each and their difference: the added
latency of a fallback rendering. Memory: the proportional set size (PSS, from
``/proc/<pid>/smaps_rollup``) of every process below this one, idle between questions and
sampled every 10 ms during one; the difference of the peak over the idle size is the
browser's memory per question. Then, in a fresh process, one question with the mode off:
whether Playwright was imported and how many processes were started.

    python bench/browser_fallback.py [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from external_query_service import ExternalQueryService
from external_query_service.testing import Reply, World, hit

QUESTION = "湛江港第{n}号公告的货物吞吐量是多少？"
PARAGRAPHS = [
    "湛江港集团第{n}号公告：今年前十个月湛江港货物吞吐量达到2.6亿吨，同比增长百分之八。",
    "集装箱航线持续加密，港口方面表示将继续推进智慧港口建设，提升通关效率和服务水平。",
]
SHELL = """<!doctype html><html lang="zh"><head><meta charset="utf-8"><title>湛江港</title>
</head><body><div id="app"></div><script>
fetch("story.json").then(r => r.json()).then(s => {
  document.getElementById("app").innerHTML =
    "<article><h1>" + s.title + "</h1>" + s.paragraphs.map(p => "<p>" + p + "</p>").join("") +
    "</article>";
});
</script></body></html>"""


def serve(world: World, kind: str, n: int) -> str:
    """A question's page of ``kind`` (``static`` or ``script``); returns the question."""
    paragraphs = [text.format(n=n) for text in PARAGRAPHS]
    title = f"湛江港公告 {n}"
    if kind == "static":
        body = "".join(f"<p>{text}</p>" for text in paragraphs)
        html = f"<html lang='zh'><head><meta charset='utf-8'><title>{title}</title></head>"
        html += f"<body><article><h1>{title}</h1>{body}</article></body></html>"
    else:
        story = json.dumps({"title": title, "paragraphs": paragraphs}).encode()
        world.route(
            world.url(f"{kind}-{n}.test", "/n/story.json"),
            Reply(body=story, content_type="application/json"),
        )
        html = SHELL
    url = world.page(f"{kind}-{n}.test", "/n/page", html)
    question = QUESTION.format(n=n)
    world.results(question, [hit(url, title, "湛江港")])
    return question


def descendants() -> set[int]:
    """Every live process below this one."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def descendants_pss_kib() -> int:
    """The PSS of every live process below this one, in KiB."""
    total = 0
    for pid in descendants():
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def timed(service: ExternalQueryService, question: str) -> float:
    started = time.perf_counter()
    answer = service.answer(question, {"entities": ["湛江港"]})
    elapsed = time.perf_counter() - started
    if answer.status != "answered":
        detail = answer.audit.named("attempt")[0].detail
        raise SystemExit(f"not answered: {question} ({answer.reason}): {dict(detail)}")
    return elapsed


def peak_during(service: ExternalQueryService, question: str) -> int:
    """The peak PSS below this process while ``question`` is answered."""
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, descendants_pss_kib())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        timed(service, question)
    finally:
        done.set()
        sampler.join()
    return peak


def measure(runs: int) -> None:
    with World() as world:
        static = [serve(world, "static", n) for n in range(runs)]
        script = [serve(world, "script", 1000 + n) for n in range(runs + 2)]
        settings = world.settings(world.searxng(), analysis={"processes": 0})
        with ExternalQueryService(settings) as service:
            timed(service, static[0])  # warm the text pipeline
            off = [timed(service, question) for question in static]
        fallback_settings = world.settings(
            world.searxng(), analysis={"processes": 0}, browser={"mode": "fallback"}
        )
        with ExternalQueryService(fallback_settings) as service:
            first = timed(service, script[0])  # starts Chromium
            rendered = [timed(service, question) for question in script[1 : runs + 1]]
            idle = descendants_pss_kib()
            peak = peak_during(service, script[runs + 1])
            after = descendants_pss_kib()
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1 and 5 min)")
    print(f"static page, browser off: median {statistics.median(off) * 1000:.0f} ms ({runs} runs)")
    print(
        f"script page, fallback:    median {statistics.median(rendered) * 1000:.0f} ms "
        f"({runs} runs); first question (starts Chromium) {first * 1000:.0f} ms"
    )
    added = statistics.median(rendered) - statistics.median(off)
    print(f"added latency of a fallback rendering: {added * 1000:.0f} ms (median difference)")
    print(
        f"browser memory (PSS below this process): idle {idle / 1024:.0f} MiB, peak during a "
        f"question {peak / 1024:.0f} MiB (+{(peak - idle) / 1024:.0f} MiB), after it "
        f"{after / 1024:.0f} MiB"
    )


_OFF = """
import sys
from external_query_service.testing import World, hit
from external_query_service import ExternalQueryService
sys.path.insert(0, {bench!r})
from browser_fallback import descendants, serve
with World() as world:
    question = serve(world, "script", 0)
    settings = world.settings(world.searxng(), analysis={{"processes": 0}})
    with ExternalQueryService(settings) as service:
        service.answer(question)
        print("mode off: playwright imported:", "playwright" in sys.modules,
              "| processes below this one:", len(descendants()),
              "| service.browser:", service.browser)
"""


def mode_off() -> None:
    code = _OFF.format(bench=str(Path(__file__).parent))
    subprocess.run([sys.executable, "-c", code], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    measure(args.runs)
    mode_off()


if __name__ == "__main__":
    main()
