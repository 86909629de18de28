"""Worker priority: the service's throughput with its workers at nice 0 and at nice 5, beside a
CPU-bound process.

    python bench/niceness.py [--questions 120] [--pages 8] [--concurrency 20]
        [--latency-ms 50] [--rounds 3] [--levels 0 5] [--quiet]

The world and the load are ``peers.py``'s (``throughput.py``'s world; each run a fresh service
in a process of its own). One more process keeps a core busy with a Python loop the whole time
(``--quiet``: none), as a neighbour on a shared host would. Each round runs the service once
per ``[analysis] worker_niceness`` level, the order alternating from round to round; printed:
q/s, p50/p95 and CPU per question, min/median/max over the rounds, and each level's median q/s
over the first level's. The default ``worker_niceness`` is chosen from these figures
(``docs/settings.md``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from peers import busy_core, load_average, run_peer, spread
from throughput import served_world


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--levels", type=int, nargs="+", default=[0, 5])
    parser.add_argument("--quiet", action="store_true", help="no CPU-bound process beside")
    args = parser.parse_args()

    with (
        served_world(args.questions + 1, args.pages, args.latency_ms) as (base, _),
        ExitStack() as beside,
    ):
        print(
            f"{args.questions} questions x {args.pages} pages, concurrency {args.concurrency}, "
            f"{args.latency_ms} ms latency, {args.rounds} interleaved rounds, "
            + ("nothing beside" if args.quiet else "one CPU-bound process beside")
        )
        print(f"load average before: {load_average()}")
        beside.enter_context(busy_core(not args.quiet))
        runs: dict[int, list[dict[str, Any]]] = {level: [] for level in args.levels}
        for round_ in range(args.rounds):
            order = args.levels if round_ % 2 == 0 else args.levels[::-1]
            for level in order:
                analysis = base.analysis.model_copy(update={"worker_niceness": level})
                settings = base.model_copy(update={"analysis": analysis})
                result = run_peer("ours", settings, args.questions, args.concurrency)
                runs[level].append(result)
                print(
                    f"  round {round_ + 1} nice {level:2d}: {result['qps']:6.2f} q/s  "
                    f"p95 {result['p95']:.2f} s  CPU/q {result['cpu_q'] * 1000:4.0f} ms  "
                    f"{result['outcomes']}",
                    flush=True,
                )
        print(f"load average after: {load_average()}")
        print()
        print(f"{'nice':<6}{'q/s':>18}{'p50 s':>18}{'p95 s':>18}{'CPU/q ms':>18}")
        for level in args.levels:
            rs = runs[level]
            print(
                f"{level:<6}{spread([r['qps'] for r in rs]):>18}"
                f"{spread([r['p50'] for r in rs]):>18}{spread([r['p95'] for r in rs]):>18}"
                f"{spread([r['cpu_q'] for r in rs], 1000, 0):>18}"
            )
        first = statistics.median(r["qps"] for r in runs[args.levels[0]])
        for level in args.levels[1:]:
            median = statistics.median(r["qps"] for r in runs[level])
            print(f"median q/s at nice {level} / at nice {args.levels[0]}: {median / first:.2f}")


if __name__ == "__main__":
    main()
