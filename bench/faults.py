"""Faults under load: many different questions at once while a search engine fails and some
result pages misbehave, against the same questions in a world without faults.

The world (loopback, plain http, in this process): two SearXNG-format engines, ``a`` and
``b``, each answering every question after ``--search-ms``, and per question 10 result pages
under 10 site names, each after ``--page-ms``. With faults, engine ``a`` answers 30% of its
searches with HTTP 500 (``failure_rate``: the 4th, 7th and 10th of every ten), so the gateway
fails over to ``b``, and 3 of every 10 result pages misbehave: a 1-byte-per-second drip, a
binary body labelled text/html, and a redirect loop. Without faults the same pages answer
normally. Every question should be answered either way; the target is
p50(faults) <= 1.5 x p50(no faults).

    python bench/faults.py [--questions 200] [--concurrency 20] [--search-ms 50]
                           [--page-ms 100] [--failure-rate 0.3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service.testing import (
    RecordedRequest,
    Reply,
    World,
    hit,
    json_reply,
    searx_body,
)

CLOCK = fixed_clock(datetime(2026, 11, 30, 2, 0, tzinfo=UTC))
PAGES_PER_QUESTION = 10
#: Result positions (of every 10) that misbehave with faults, and how.
FAULTY = {2: "drip", 5: "binary", 8: "redirect_loop"}


def question(n: int) -> str:
    """The n-th question: each its own search and its own pages."""
    return f"2026年珠海航展第{n}号展台展出了哪些新型无人机？"


def page(n: int, site: int) -> str:
    """A news page answering question ``n`` (site ``site``'s version)."""
    paragraphs = "".join(
        f"<p>珠海航展第{n}号展台：新型无人机首次公开亮相，第{site}家媒体报道，"
        f"来自四十多个国家和地区的参展商参加，第{i}段介绍了无人机的性能与用途。</p>"
        for i in range(8)
    )
    return (
        f"<html><head><meta charset='utf-8'><title>第{n}号展台 {site}</title></head><body>"
        f"<article><h1>珠海航展第{n}号展台新型无人机</h1>{paragraphs}</article></body></html>"
    )


def build(world: World, questions: int, args: argparse.Namespace, *, faults: bool) -> Settings:
    """Serve both engines and every page; return settings with engines ``a`` then ``b``."""
    results: dict[str, list[dict[str, object]]] = {}
    for n in range(questions):
        hits = []
        for site in range(PAGES_PER_QUESTION):
            url = world.url(f"site{site}.test", f"/q{n}")
            kind = FAULTY.get(site) if faults else None
            if kind is None:
                world.route(url, Reply(body=page(n, site)), latency_ms=args.page_ms)
            else:
                world.fault(url, kind, content_type="text/html; charset=utf-8")  # type: ignore[arg-type]
            hits.append(hit(url, f"第{n}号展台 {site}", "珠海航展新型无人机首次公开亮相"))
        results[question(n)] = hits

    def engine(request: RecordedRequest) -> Reply:
        q = request.query.get("q", [""])[0]
        return json_reply(searx_body(q, results.get(q, [])))

    adapters = []
    for name in ("a", "b"):
        base = world.url(f"search-{name}.test", "/searx")
        rate = args.failure_rate if faults and name == "a" else 0.0
        world.route(f"{base}/search", engine, latency_ms=args.search_ms, failure_rate=rate)
        adapters.append({"kind": "searxng", "id": name, "base_url": base})
    return world.settings(*adapters, analysis={"processes": None})  # the service default


@dataclass
class Run:
    """What one pass over the questions gave."""

    walls: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    crashes: Counter[str] = field(default_factory=Counter)
    failovers: int = 0
    total_s: float = 0.0


async def run(settings: Settings, questions: int, concurrency: int) -> Run:
    """Every question once, ``concurrency`` at a time, on one fresh service."""
    result = Run()
    gate = asyncio.Semaphore(concurrency)

    async def one(n: int) -> None:
        async with gate:
            started = time.perf_counter()
            try:
                answer = await service.aanswer(question(n))
            except Exception as exc:
                result.crashes[type(exc).__name__] += 1
                return
            result.walls.append(time.perf_counter() - started)
            result.statuses[answer.status] += 1
            tried = [
                attempt.adapter_id for attempt in answer.attempts if attempt.status != "skipped"
            ]
            result.failovers += tried[:2] == ["a", "b"]

    async with ExternalQueryService(settings, clock=CLOCK) as service:
        service.warm_up()
        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(questions)))
        result.total_s = time.perf_counter() - started
    return result


def percentile(values: list[float], share: float) -> float:
    """The ``share`` percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def report(label: str, result: Run) -> float:
    """Print one run's figures; return its p50."""
    p50 = statistics.median(result.walls) if result.walls else float("nan")
    p95 = percentile(result.walls, 0.95) if result.walls else float("nan")
    crashes = dict(result.crashes) or 0
    print(
        f"{label:>10}: crashes {crashes}, outcomes {dict(result.statuses)}, "
        f"failovers a->b {result.failovers}, p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
        f"all done in {result.total_s:.1f} s"
    )
    return p50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--search-ms", type=int, default=50)
    parser.add_argument("--page-ms", type=int, default=100)
    parser.add_argument("--failure-rate", type=float, default=0.3)
    args = parser.parse_args()

    figures = {}
    for label, faults in (("no faults", False), ("faults", True)):
        with World() as world:
            settings = build(world, args.questions, args, faults=faults)
            figures[label] = report(
                label, asyncio.run(run(settings, args.questions, args.concurrency))
            )
    ratio = figures["faults"] / figures["no faults"]
    print(f"p50(faults) / p50(no faults): {ratio:.2f} (target <= 1.50)")


if __name__ == "__main__":
    main()
