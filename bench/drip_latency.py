"""A dripping page among good ones: does a straggler set the attempt's latency?

The world (loopback, plain http, in this process): one SearXNG-format engine lists a page
that drips its body (``World.fault(..., "drip")``, 20 bytes a second: it never finishes in
time) ahead of four good article pages, or the four good pages alone. Each run is one
question on a fresh, warm service (``[network] max_pages`` 5, so the drip's place is never
taken by a fifth good page: the walk ends only when its grace is over); sides are
interleaved so a busy host slows both alike. It prints min/median/max of the attempt's
wall time on each side and the target: median with the drip <= 1.5 x median without it
+ 0.3 s.

    python bench/drip_latency.py [--runs 9]
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
from _port_world import QUESTION, port_engine

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.testing import World

CLOCK = fixed_clock(datetime(2026, 11, 30, 2, 0, tzinfo=UTC))
NETWORK = {"max_pages": 5, "timeout_s": 30.0, "deadline_s": 30.0}


def serve(world: World, name: str, drip: bool) -> dict[str, str]:
    """Engine ``name``'s answer (the drip first, then four good pages) and its pages."""
    ahead = []
    if drip:
        ahead.append(world.fault(f"http://drip.{name}.test/port", "drip", drip_bytes_per_s=20))
    return port_engine(world, name, ahead, good=4)


def once(world: World, adapter: dict[str, str]) -> tuple[float, float]:
    """One question on a fresh warm service: the attempt's wall seconds (from its audit),
    and the answer's."""
    with ExternalQueryService(world.settings(adapter, network=NETWORK), clock=CLOCK) as service:
        service.warm_up()
        started = time.perf_counter()
        answer = service.answer(QUESTION)
        elapsed = time.perf_counter() - started
    if answer.status != "answered":
        raise SystemExit(f"not answered: {answer.status} {answer.reason}")
    return answer.attempts[0].duration_ms / 1000, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    attempts: dict[bool, list[float]] = {False: [], True: []}
    answers: dict[bool, list[float]] = {False: [], True: []}
    with World() as world:
        adapters = {False: serve(world, "good", False), True: serve(world, "drip", True)}
        for _ in range(args.runs):
            for drip in (False, True):
                attempt, answer = once(world, adapters[drip])
                attempts[drip].append(attempt)
                answers[drip].append(answer)
    print(f"dripping page, {args.runs} interleaved runs, load {os.getloadavg()[0]:.1f}:")
    print(f"  attempt, four good pages : {spread(attempts[False])}")
    print(f"  attempt, drip + four good: {spread(attempts[True])}")
    print(f"  answer,  four good pages : {spread(answers[False])}")
    print(f"  answer,  drip + four good: {spread(answers[True])}")
    without, with_drip = statistics.median(attempts[False]), statistics.median(attempts[True])
    bound = 1.5 * without + 0.3
    print(
        f"  median attempt with the drip {with_drip * 1000:.0f} ms; "
        f"bound 1.5 x {without * 1000:.0f} ms + 300 ms = {bound * 1000:.0f} ms: "
        f"{'within' if with_drip <= bound else 'OVER'}"
    )


if __name__ == "__main__":
    main()
