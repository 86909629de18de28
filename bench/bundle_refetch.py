"""What ``verify --refetch`` costs against fetching a bundle's cited pages once.

The world (loopback, plain http, in this process): a SearXNG-format engine whose answer lists
``--pages`` article pages (each some 30 KB of markup around the answer), each served with
``--latency-ms`` of delay, as a distant site would answer. One question is answered once and
its bundle made. Then, interleaved so a busy host slows every side alike:

- ``fetch once``: a fresh ``SafeFetcher`` on the same settings fetches every distinct cited
  URL once, all at once, and closes (what a caller checking the pages by hand would pay);
- ``refetch``: ``verify_bundle(bundle, settings=..., refetch=True)`` (bundle read, ids
  recomputed, the same fetches, each quote judged; the pages are unchanged, so no body is
  read again);
- ``refetch, pages edited``: the same after one word of every page changed, so every page
  is read again by the reader and each quote looked for (shown, not held to the target).

It prints min/median/max of each side and the ratio of the medians ``refetch / fetch once``
(target <= 1.20), with the machine's load.

    python bench/bundle_refetch.py [--runs 9] [--pages 8] [--latency-ms 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _measure import spread

from external_query_service import ExternalQueryService, Settings, fixed_clock, verify_bundle
from external_query_service.net._fetch import SafeFetcher
from external_query_service.testing import Reply, World, article, hit

CLOCK = fixed_clock(datetime(2026, 11, 30, 2, 0, tzinfo=UTC))
QUESTION = "湛江港今年吞吐量是多少？"
FILLER = "港区建设持续推进，码头作业有序开展，航道疏浚工程按计划进行。" * 12


def page(index: int, word: str) -> str:
    answer = (
        f"湛江港集团发布数据显示，今年前十个月湛江港货物吞吐量达到2.{index}亿吨，"
        f"同比增长百分之{word}。"
    )
    return article(f"湛江港吞吐量报道{index}", [answer, *(FILLER for _ in range(8))])


def serve(world: World, pages: int, latency_ms: int, word: str) -> list[str]:
    urls = []
    for index in range(pages):
        url = world.url(f"site{index}.port.test", "/throughput")
        world.route(url, Reply(body=page(index, word)), latency_ms=latency_ms)
        urls.append(url)
    return urls


async def fetch_once(settings: Settings, urls: list[str]) -> int:
    fetcher = SafeFetcher(settings.network)
    try:
        pages = await asyncio.gather(*(fetcher.fetch(url) for url in urls))
    finally:
        await fetcher.aclose()
    return sum(len(item.body) for item in pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--latency-ms", type=int, default=40)
    args = parser.parse_args()
    with World() as world:
        urls = serve(world, args.pages, args.latency_ms, "八")
        world.results(QUESTION, [hit(url, "湛江港吞吐量", "吞吐量", "2026-11-20") for url in urls])
        network = {"max_pages": args.pages, "timeout_s": 30.0, "deadline_s": 60.0}
        settings = world.settings(world.searxng(), network=network)
        with ExternalQueryService(settings, clock=CLOCK) as service:
            answer = service.answer(QUESTION)
        bundle = answer.bundle()
        cited = sorted({source["final_url"] for source in json.loads(bundle)["sources"]})
        print(
            f"answer {answer.status}: {len(json.loads(bundle)['sources'])} quotes from "
            f"{len(cited)} pages; bundle {len(bundle.encode())} bytes"
        )
        sides: dict[str, list[float]] = {"fetch once": [], "refetch": [], "edited": []}
        verdicts = set()
        for _ in range(args.runs):
            serve(world, args.pages, args.latency_ms, "八")
            started = time.perf_counter()
            asyncio.run(fetch_once(settings, cited))
            sides["fetch once"].append(time.perf_counter() - started)
            started = time.perf_counter()
            verdicts.add(verify_bundle(bundle, settings=settings, refetch=True).verdict)
            sides["refetch"].append(time.perf_counter() - started)
            serve(world, args.pages, args.latency_ms, "九")
            started = time.perf_counter()
            edited = verify_bundle(bundle, settings=settings, refetch=True).verdict
            sides["edited"].append(time.perf_counter() - started)
        ratio = statistics.median(sides["refetch"]) / statistics.median(sides["fetch once"])
        print(
            f"{args.runs} interleaved runs, {len(cited)} pages at {args.latency_ms} ms each, "
            f"load {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores):"
        )
        print(f"  fetch once:             {spread(sides['fetch once'])}")
        print(f"  refetch ({'/'.join(sorted(verdicts))}):        {spread(sides['refetch'])}")
        print(f"  refetch, pages edited ({edited}): {spread(sides['edited'])}")
        print(f"  refetch / fetch once (medians): {ratio:.2f} (target <= 1.20)")


if __name__ == "__main__":
    main()
