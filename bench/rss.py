"""Memory over a long run: RSS of the service and its workers across 1,000 sequential questions.

    python bench/rss.py [--questions 1000] [--pages 4] [--latency-ms 10] [--every 100]

The world is ``throughput.py``'s (distinct questions, each with ``--pages`` distinct 20-60 KB
article pages, nothing shared between questions), served from a process of its own. One
service with default settings (``[cache]`` on, its bounds as configured, the analysis pool)
answers the questions one after another; every ``--every`` questions the script prints the
resident memory (``VmRSS`` from ``/proc``) of the service's process plus its analysis workers,
and at the end RSS at question 1,000 over RSS at question 200 (target <= 1.1: flat after
warm-up), with the bytes the evidence store accounts for and the workers replaced so far
(``[analysis] worker_max_pages``). Linux only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from peers import load_average, rss_mb
from throughput import NOW, question, served_world

from external_query_service import ExternalQueryService, Settings, fixed_clock

TARGET = 1.1
WARM = 200


async def measure(settings: Settings, count: int, every: int) -> dict[int, float]:
    readings: dict[int, float] = {}
    async with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        await service.awarm_up()
        for n in range(count):
            await service.aanswer(question(n))
            done = n + 1
            if done % every == 0 or done in (WARM, count):
                rss = sum(rss_mb(pid) for pid in (os.getpid(), *service.analysis.pids()))
                readings[done] = rss
                print(
                    f"  question {done:5d}: RSS {rss:7.1f} MB (service + workers); "
                    f"store {service.store.size / 1e6:6.1f} MB accounted, "
                    f"workers recycled {service.analysis.recycled}",
                    flush=True,
                )
    return readings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--latency-ms", type=int, default=10)
    parser.add_argument("--every", type=int, default=100)
    args = parser.parse_args()

    with served_world(args.questions, args.pages, args.latency_ms) as (settings, _):
        print(
            f"{args.questions} sequential questions x {args.pages} pages, "
            f"{args.latency_ms} ms latency; load average {load_average()}"
        )
        readings = asyncio.run(measure(settings, args.questions, args.every))
        print(f"load average after: {load_average()}")
        if WARM in readings and args.questions in readings:
            ratio = readings[args.questions] / readings[WARM]
            verdict = "met" if ratio <= TARGET else "NOT met"
            print(
                f"RSS at question {args.questions} / at question {WARM}: {ratio:.3f} "
                f"(target <= {TARGET}: {verdict})"
            )


if __name__ == "__main__":
    main()
