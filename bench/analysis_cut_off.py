"""Analysis stragglers: four CPU-bomb pages ahead of one good page, with one analysis worker,
against the good page alone.

The world (loopback, plain http, in this process): one SearXNG-format engine whose answer
lists the four pages of ``testing.content.markup_bombs`` (a huge table, 60,000 attributes,
deep nesting, 20,000 links) and then the good page, or the good page alone. Each run is one
question on a fresh service with ``[analysis] processes = 1``, its worker warm before the
question is asked; runs with and without the bombs are interleaved so a busy host slows both
alike. It prints min/median/max of each side's answer time and the ratio of the medians
(target <= 1.50: the bombs are cut off as ``cut_off:analysis`` without reaching the worker).
``--uncut`` adds a third side with the markup budget lifted, to show what analysing the bombs
would cost (each is then stopped by ``page_cpu_s``, so expect tens of seconds a run).

    python bench/analysis_cut_off.py [--runs 5] [--uncut]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _measure import spread

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.adapters import _page_walk as page_walk
from external_query_service.testing import Reply, World, article, hit, json_reply, searx_body
from external_query_service.testing.content import markup_bombs

CLOCK = fixed_clock(datetime(2026, 11, 30, 2, 0, tzinfo=UTC))
QUESTION = "湛江港今年吞吐量是多少？"
ANSWER = "湛江港集团发布数据显示，今年前十个月湛江港货物吞吐量达到2.6亿吨，同比增长百分之八。"
NETWORK = {"max_pages": 5, "max_page_bytes": 4_000_000, "timeout_s": 60.0, "deadline_s": 120.0}


def serve(world: World, name: str, with_bombs: bool) -> dict[str, str]:
    """Serve engine ``name``'s answer (bombs first, or the good page alone) and its pages;
    the adapter settings that search it."""
    pages = {**(markup_bombs() if with_bombs else {}), "good": ""}
    hits = []
    for page, body in pages.items():
        url = world.url(f"{page}.{name}.test", "/port")
        if page == "good":
            body = article("湛江港吞吐量再创新高", [ANSWER], published="2026-11-20")
        world.route(url, Reply(body=body))
        hits.append(hit(url, "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"))
    base = world.url(f"search-{name}.test", "/searx")
    world.route(f"{base}/search", json_reply(searx_body(QUESTION, hits)))
    return {"kind": "searxng", "id": name, "base_url": base}


def once(world: World, adapter: dict[str, str]) -> tuple[float, str, list[str]]:
    """One question on a fresh service whose one worker is warm: seconds, status, failures."""
    with ExternalQueryService(
        world.settings(adapter, network=NETWORK, analysis={"processes": 1}), clock=CLOCK
    ) as service:
        service.warm_up()
        started = time.perf_counter()
        answer = service.answer(QUESTION)
        elapsed = time.perf_counter() - started
    failures: list[str] = answer.audit.named("attempt")[0].detail["page_failures"]
    return elapsed, answer.status, [line.split()[-1] for line in failures]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--uncut", action="store_true", help="also time the bombs analysed")
    args = parser.parse_args()

    sides = ["good page alone", "four bombs first"] + (["bombs analysed"] if args.uncut else [])
    times: dict[str, list[float]] = {side: [] for side in sides}
    fates: set[str] = set()  # what became of the bombs when the budget holds
    with World() as world:
        alone, bombs = serve(world, "alone", False), serve(world, "bombs", True)
        for _ in range(args.runs):
            for side in sides:
                budget = page_walk.ANALYSIS_MARKUP_BUDGET
                if side == "bombs analysed":
                    page_walk.ANALYSIS_MARKUP_BUDGET = sys.maxsize
                try:
                    elapsed, status, failures = once(world, alone if side == sides[0] else bombs)
                finally:
                    page_walk.ANALYSIS_MARKUP_BUDGET = budget
                if status != "answered":
                    raise SystemExit(f"{side}: not answered ({status}, {failures})")
                times[side].append(elapsed)
                if side == sides[1]:
                    fates.update(failures)
        print(f"analysis cut-off, {args.runs} interleaved runs, load {os.getloadavg()[0]:.1f}:")
        for side in sides:
            print(f"{side:>17}: {spread(times[side])}")
        print(f"{'bombs ended as':>17}: {', '.join(sorted(fates))}")
    ratio = statistics.median(times[sides[1]]) / statistics.median(times[sides[0]])
    print(f"median(four bombs first) / median(good page alone): {ratio:.2f} (target <= 1.50)")


if __name__ == "__main__":
    main()
