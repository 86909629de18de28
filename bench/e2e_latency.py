"""End to end on a loopback world with injected latency: how close is wall time to the
network critical path?

The world: SearXNG answers after 200 ms; each of 8 pages, under 8 distinct site names,
answers after 300 ms. Fetching pages one after another would take 200 + 8 × 300 ms; the
critical path is 200 + 300 = 500 ms.
The ratio wall / critical path should stay ≤ 1.10. The service runs with ``[cache] enabled =
false``, so every run goes to the network. The world is served from a process of its own
(spawned, sharing nothing with the service), as a real network's servers would be: served from
threads of the measured process, its own work would hold the service's interpreter lock and
count against the service; ``--in-process`` serves it that way, to compare.

    python bench/e2e_latency.py [--runs 5] [--pages 8] [--search-ms 200] [--page-ms 300]
                                [--in-process]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from multiprocessing.connection import Connection

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service.settings import CacheSettings
from external_query_service.testing import Reply, World, hit, json_reply, searx_body

QUESTION = "2026年珠海航展有哪些新机型亮相？"


def page(n: int) -> str:
    paragraphs = "".join(
        f"<p>珠海航展第{n}篇报道：新型无人运输机与舰载预警机首次公开亮相，"
        f"来自四十多个国家和地区的参展商参加，第{i}段详细介绍了新机型的性能与用途。</p>"
        for i in range(12)
    )
    nav = "".join(f'<li><a href="/c/{i}">栏目{i}</a></li>' for i in range(30))
    return (
        f"<html><head><meta charset='utf-8'><title>航展报道 {n}</title></head><body>"
        f"<nav><ul>{nav}</ul></nav><article><h1>珠海航展新机型 {n}</h1>{paragraphs}</article>"
        "<footer>版权所有</footer></body></html>"
    )


def build(world: World, pages: int, search_ms: int, page_ms: int) -> Settings:
    """The world: ``pages`` sites under their own names, each slow by ``page_ms``."""
    results = []
    for n in range(pages):
        url = world.route(f"http://site-{n}.test/a", Reply(body=page(n)), latency_ms=page_ms)
        results.append(hit(url, f"报道 {n}", "航展"))
    search = world.searxng()
    world.route(
        f"{search['base_url']}/search",
        json_reply(searx_body(QUESTION, results)),
        latency_ms=search_ms,
    )
    # The service's own analysis default (a worker per core), not a test world's thread.
    return world.settings(search, network={"max_pages": pages}, analysis={"processes": None})


def _serve(pages: int, search_ms: int, page_ms: int, pipe: Connection) -> None:
    """The world process: serve until the parent says stop."""
    with World() as world:
        pipe.send(build(world, pages, search_ms, page_ms).model_dump(mode="json"))
        pipe.recv()


@contextmanager
def served(pages: int, search_ms: int, page_ms: int, *, in_process: bool) -> Iterator[Settings]:
    """The settings that reach the world, served from a spawned process or, with
    ``in_process``, from this one."""
    if in_process:
        with World() as world:
            yield build(world, pages, search_ms, page_ms)
        return
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve, args=(pages, search_ms, page_ms, theirs), daemon=True)
    process.start()
    try:
        yield Settings.from_mapping(ours.recv())
    finally:
        ours.send("stop")
        process.join(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--search-ms", type=int, default=200)
    parser.add_argument("--page-ms", type=int, default=300)
    parser.add_argument(
        "--in-process", action="store_true", help="serve the world from this process's threads"
    )
    args = parser.parse_args()

    critical = (args.search_ms + args.page_ms) / 1000
    serial = (args.search_ms + args.pages * args.page_ms) / 1000
    walls = []
    with served(args.pages, args.search_ms, args.page_ms, in_process=args.in_process) as settings:
        settings = settings.model_copy(update={"cache": CacheSettings(enabled=False)})
        clock = fixed_clock(datetime(2026, 11, 30, 2, 0, tzinfo=UTC))
        with ExternalQueryService(settings, clock=clock) as service:
            service.answer(QUESTION)  # warm-up: imports, OpenCC tables, trafilatura
            for _ in range(args.runs):
                started = time.perf_counter()
                answer = service.answer(QUESTION)
                walls.append(time.perf_counter() - started)
    fetched = answer.attempts[0].pages_fetched
    median = statistics.median(walls)
    print(
        f"pages fetched per run: {fetched} (status {answer.status}, {len(answer.sources)} sources)"
    )
    print(
        f"critical path: {critical * 1000:.0f} ms; serial fetching would be {serial * 1000:.0f} ms"
    )
    print(
        f"wall time over {args.runs} runs: median {median * 1000:.0f} ms, "
        f"min {min(walls) * 1000:.0f} ms, max {max(walls) * 1000:.0f} ms"
    )
    print(f"wall / critical path: {median / critical:.2f} (target <= 1.10)")


if __name__ == "__main__":
    main()
