"""Cold start: a one-shot ``external-query ask`` as a fresh process, and the first question
of a running service against a second one over other pages.

The world (plain http on loopback, in this process, no injected latency): a SearXNG-format
search endpoint and 5 pages under 5 site names. A settings file points a ``searxng``
adapter there (``[network] resolve`` maps the site names to 127.0.0.1, the only admitted
network). Mode ``cli`` runs ``python -m external_query_service.cli ask QUESTION --config
FILE`` as a fresh subprocess ``--runs`` times and prints wall time min/median (target
median <= 0.8 s). Mode ``first`` answers, in one fresh process per run, a first question and
then a second one over other pages (nothing shared but the process), and prints the ratio
first / second (target <= 1.2); ``--warm-up`` calls ``ExternalQueryService.warm_up()``
before the first question, outside the measurement.

    python bench/cold_start.py [--mode cli|first|both] [--runs 5] [--pages 5] [--warm-up]
        [--processes N]

``python -X importtime -m external_query_service.cli ask ...`` shows where import time goes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from external_query_service.testing import World, hit, json_reply, searx_body
from external_query_service.testing.world_files import dump_toml

QUESTION = "2026年珠海航展有哪些新机型亮相？"
SECOND = "2026年珠海航展有哪些无人机参展？"
NOW = "2026-11-30T10:00:00+08:00"


def page(n: int, topic: str) -> str:
    """One news page about ``topic``."""
    paragraphs = "".join(
        f"<p>珠海航展第{n}篇报道：{topic}首次公开亮相，"
        f"来自四十多个国家和地区的参展商参加，第{i}段详细介绍了新机型的性能与用途。</p>"
        for i in range(12)
    )
    return (
        f"<html><head><meta charset='utf-8'><title>航展报道 {n}</title></head><body>"
        f"<article><h1>珠海航展 {topic} {n}</h1>{paragraphs}</article></body></html>"
    )


def build(world: World, pages: int, processes: int | None = None) -> dict[str, object]:
    """Serve two result sets (one per question, other pages each) and return the settings
    table pointing a searxng adapter at the world."""
    for question, prefix, topic in ((QUESTION, "a", "新型无人运输机"), (SECOND, "b", "察打无人机")):
        results = []
        for n in range(pages):
            url = world.page(f"{prefix}{n}.site.test", "/news", page(n, topic))
            results.append(hit(url, f"报道 {n}", topic))
        world.route(
            f"{world.base('/engine')}/search?q={question}",
            json_reply(searx_body(question, results)),
        )
    settings: dict[str, object] = {
        "network": {
            "allowed_networks": ["127.0.0.1/32"],
            "resolve": dict.fromkeys(sorted(world.sites), "127.0.0.1"),
            "max_pages": pages,
        },
        "adapters": [{"kind": "searxng", "id": "searx", "base_url": world.base("/engine")}],
    }
    if processes is not None:
        settings["analysis"] = {"processes": processes}
    return settings


def run_cli(config: Path, runs: int) -> list[float]:
    """Wall times of ``runs`` fresh ``ask`` processes."""
    command = [
        sys.executable,
        "-m",
        "external_query_service.cli",
        "ask",
        QUESTION,
        "--config",
        str(config),
        "--now",
        NOW,
        "--format",
        "json",
    ]
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"ask failed ({done.returncode}): {done.stderr.strip()}")
        status = json.loads(done.stdout)["status"]
        if status != "answered":
            raise SystemExit(f"ask did not answer: {status}")
    return walls


_FIRST_SECOND = """
import json, sys, time
t0 = time.perf_counter()
from datetime import datetime
from external_query_service import ExternalQueryService, Settings, fixed_clock
config, first, second, now, warm = sys.argv[1:6]
settings = Settings.load(config)
with ExternalQueryService(settings, clock=fixed_clock(datetime.fromisoformat(now))) as service:
    if warm == "1":
        service.warm_up()
    t1 = time.perf_counter()
    a = service.answer(first)
    t2 = time.perf_counter()
    b = service.answer(second)
    t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "second": t3 - t2,
                  "status": [a.status, b.status]}))
"""


def run_first_second(config: Path, runs: int, warm: bool) -> list[dict[str, float]]:
    """First and second question times, each run in a fresh process."""
    results = []
    for _ in range(runs):
        argv = [str(config), QUESTION, SECOND, NOW, str(int(warm))]
        done = subprocess.run(
            [sys.executable, "-c", _FIRST_SECOND, *argv],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"first/second failed: {done.stderr.strip()}")
        data = json.loads(done.stdout.strip().splitlines()[-1])
        if data["status"] != ["answered", "answered"]:
            raise SystemExit(f"not answered: {data['status']}")
        results.append(data)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["cli", "first", "both"], default="both")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--warm-up", action="store_true", help="call warm_up() before question 1")
    parser.add_argument(
        "--processes", type=int, help="[analysis] processes (default: one per usable core)"
    )
    args = parser.parse_args()

    with World() as world, tempfile.TemporaryDirectory(prefix="eqs-cold-") as tmp:
        config = Path(tmp) / "cold.toml"
        config.write_text(dump_toml(build(world, args.pages, args.processes)), encoding="utf-8")
        if args.mode in ("cli", "both"):
            walls = run_cli(config, args.runs)
            print(
                f"one-shot ask, fresh process x{args.runs}: min {min(walls):.2f} s, "
                f"median {statistics.median(walls):.2f} s (target median <= 0.80 s)"
            )
        if args.mode in ("first", "both"):
            rows = run_first_second(config, args.runs, args.warm_up)
            first = statistics.median(row["first"] for row in rows)
            second = statistics.median(row["second"] for row in rows)
            imported = statistics.median(row["import"] for row in rows)
            label = "after warm_up()" if args.warm_up else "no warm_up()"
            print(
                f"in one process ({label}), x{args.runs}: import+settings "
                f"{imported * 1000:.0f} ms, first question {first * 1000:.0f} ms, "
                f"second {second * 1000:.0f} ms"
            )
            print(f"first / second: {first / second:.2f} (target <= 1.20)")


if __name__ == "__main__":
    main()
