"""Many questions at once: 20 concurrent copies of one question against one service, over
the wall time of that question alone, in the same loopback world.

The world: SearXNG answers after 200 ms; each of 5 pages, under 5 site names, after 300 ms,
so one question's network floor is 500 ms. Shared work (one search call and one fetch per
page for all the copies in flight, one analysis per page) should keep 20 copies close to
one: the ratio target is <= 1.5. Each round starts from a fresh service, so nothing is
cached from an earlier round; the world's request log shows how many calls reached it.

    python bench/concurrency.py [--copies 20] [--runs 3] [--pages 5] [--search-ms 200]
                                [--page-ms 300] [--no-cache]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from e2e_latency import QUESTION, build

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service.settings import CacheSettings
from external_query_service.testing import World

CLOCK = fixed_clock(datetime(2026, 11, 30, 2, 0, tzinfo=UTC))


def warm_up(settings: Settings) -> None:
    """Imports, OpenCC tables and trafilatura, paid once outside every measurement."""
    with ExternalQueryService(settings, clock=CLOCK) as service:
        service.answer(QUESTION)


async def round_trip(settings: Settings, copies: int) -> float:
    """Wall time of ``copies`` concurrent questions on one fresh service."""
    async with ExternalQueryService(settings, clock=CLOCK) as service:
        started = time.perf_counter()
        answers = await asyncio.gather(*(service.aanswer(QUESTION) for _ in range(copies)))
        wall = time.perf_counter() - started
    assert all(answer.status == answers[0].status for answer in answers)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--search-ms", type=int, default=200)
    parser.add_argument("--page-ms", type=int, default=300)
    parser.add_argument("--no-cache", action="store_true", help="run with [cache] enabled = false")
    args = parser.parse_args()

    floor = (args.search_ms + args.page_ms) / 1000
    with World() as world:
        settings = build(world, args.pages, args.search_ms, args.page_ms)
        if args.no_cache:
            settings = settings.model_copy(update={"cache": CacheSettings(enabled=False)})
        warm_up(settings)
        singles, manys = [], []
        for _ in range(args.runs):
            singles.append(asyncio.run(round_trip(settings, 1)))
            before = len(world.requests)
            manys.append(asyncio.run(round_trip(settings, args.copies)))
            calls = len(world.requests) - before
    one, many = statistics.median(singles), statistics.median(manys)
    print(f"network floor of one question: {floor * 1000:.0f} ms")
    print(f"one question: median {one * 1000:.0f} ms over {args.runs} fresh services")
    print(
        f"{args.copies} concurrent copies: median {many * 1000:.0f} ms "
        f"({calls} requests reached the world in the last round)"
    )
    print(f"{args.copies} copies / one: {many / one:.2f} (target <= 1.50)")
    print(f"{args.copies} copies / network floor: {many / floor:.2f}")


if __name__ == "__main__":
    main()
