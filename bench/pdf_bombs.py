"""PDF bombs among good pages: answer latency, the process tree's peak memory, close() time.

The world (loopback, plain http, in this process): one SearXNG-format engine lists two PDF
bombs ahead of three good article pages, or the good pages alone. The bombs are the two of
``tests/support/pdfs.py``: a deflate bomb (one page stream of 2 GB of blanks, about 2 MB on
disk) and 50 pages sharing one 200 MB stream (about 0.2 MB). Each run is one question on a
fresh service (``[analysis] processes`` 0: pages analysed in threads of the service; 1: one
warm worker), warm before the question is asked; sides are interleaved so a busy host slows
both alike. For each side it prints min/median/max of the answer time, of the peak growth
of the resident memory of the whole process tree (the service, its workers, PDF readers and
any other child; sampled every 10 ms from ``/proc`` while the question runs, over the
tree's RSS just before it) and of ``close()``, and what became of the bombs. Targets: answer
within 3 s, the tree grows by at most 500 MiB, ``close()`` within 1.5 s. Linux only.

    python bench/pdf_bombs.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _measure import tree_rss
from _port_world import QUESTION, port_engine

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.testing import Reply, World
from tests.support.pdfs import deflate_bomb, shared_stream_bomb

CLOCK = fixed_clock(datetime(2026, 11, 30, 2, 0, tzinfo=UTC))
NETWORK = {"max_pages": 5, "max_page_bytes": 4_000_000, "timeout_s": 60.0, "deadline_s": 120.0}
PDF = "application/pdf"
MIB = 1024 * 1024


def serve(world: World, name: str, bombs: dict[str, bytes]) -> dict[str, str]:
    """Serve engine ``name``'s answer (the bombs first, then three good pages) and its pages;
    the adapter settings that search it."""
    ahead = []
    for page, body in bombs.items():
        url = world.url(f"{page}.{name}.test", "/notice.pdf")
        world.route(url, Reply(body=body, content_type=PDF))
        ahead.append(url)
    return port_engine(world, name, ahead, good=3)


class Peak:
    """The highest ``tree_rss`` seen while it runs, sampled every 10 ms."""

    def __init__(self) -> None:
        self.peak = tree_rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, tree_rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def once(world: World, adapter: dict[str, str], processes: int) -> tuple[float, int, float, str]:
    """One question on a fresh warm service: seconds, peak tree growth (bytes), close()
    seconds, and what became of the bombs."""
    settings = world.settings(adapter, network=NETWORK, analysis={"processes": processes})
    service = ExternalQueryService(settings, clock=CLOCK)
    try:
        service.warm_up()
        base = tree_rss()
        peak = Peak()
        started = time.perf_counter()
        answer = service.answer(QUESTION)
        elapsed = time.perf_counter() - started
    finally:
        closing = time.perf_counter()
        service.close()
        closed = time.perf_counter() - closing
    grown = peak.stop() - base
    if answer.status != "answered":
        raise SystemExit(f"not answered: {answer.status} {answer.reason}")
    failures: list[str] = answer.audit.named("attempt")[0].detail["page_failures"]
    return elapsed, grown, closed, " ".join(sorted(line.split()[-1] for line in failures))


def spread(values: list[float], unit: str, scale: float) -> str:
    return (
        f"min {min(values) / scale:.2f}, median {statistics.median(values) / scale:.2f}, "
        f"max {max(values) / scale:.2f} {unit}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    bombs = {
        "deflate": deflate_bomb(2_000_000_000),
        "shared": shared_stream_bomb(50, 200_000_000),
    }
    print(
        f"bombs: deflate {len(bombs['deflate']) / 1e6:.2f} MB, "
        f"shared stream {len(bombs['shared']) / 1e6:.2f} MB"
    )
    sides = [(processes, with_bombs) for processes in (0, 1) for with_bombs in (False, True)]
    results: dict[tuple[int, bool], list[tuple[float, int, float, str]]] = {s: [] for s in sides}
    with World() as world:
        adapters = {
            False: serve(world, "alone", {}),
            True: serve(world, "bombs", bombs),
        }
        for _ in range(args.runs):
            for processes, with_bombs in sides:
                results[processes, with_bombs].append(once(world, adapters[with_bombs], processes))
    print(f"PDF bombs, {args.runs} interleaved runs, load {os.getloadavg()[0]:.1f}:")
    for (processes, with_bombs), runs in results.items():
        side = f"processes={processes}, {'two bombs + good' if with_bombs else 'good alone'}"
        print(f"  {side}:")
        print(f"    answer : {spread([r[0] for r in runs], 's', 1)}")
        print(f"    tree   : +{spread([float(r[1]) for r in runs], 'MiB peak RSS', MIB)}")
        print(f"    close(): {spread([r[2] for r in runs], 's', 1)}")
        if with_bombs:
            print(f"    bombs  : {sorted({r[3] for r in runs})}")


if __name__ == "__main__":
    main()
