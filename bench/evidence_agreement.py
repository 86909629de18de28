"""What the verifier's bundle rules cost: copies, disagreeing values, an event's dates.

Builds ``--evidence`` admitted web evidence (news-length snippets, every fifth one a copy of
another, each stating a temperature and a release date) and times, in CPU milliseconds
(median of ``--runs``): ``copy_groups`` over them, ``value_conflicts`` for a weather plan,
and ``value_conflicts`` for a plan that asks for an event's date. Pure functions on
in-memory models: nothing is fetched.

    python bench/evidence_agreement.py [--evidence 40] [--runs 25]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, date, datetime

from external_query_service.models import Evidence, ExternalQueryPlan, TimeRange
from external_query_service.verifier._conflicts import value_conflicts
from external_query_service.verifier._copies import copy_groups

_ACCESSED = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


#: Characters the filler of each snippet is drawn from (its own words, not a template's).
_POOL = (
    "港口集团表示新航道投入使用集装箱航线持续加密铁矿石粮食进港量"
    "增加明显今年货物吞吐量保持增长观察继续跟踪码头泊位运输铁路公路"
)


def _snippet(number: int) -> str:
    rng = random.Random(number)
    filler = "".join(rng.choice(_POOL) for _ in range(80))
    day = 18 + number % 3  # three opinions on the date, two on the temperature
    return (
        f"湛江港新航道已于2026年11月{day}日投入使用，当日最高气温{24 + 7 * (number % 2)}°C。"
        f"{filler}。"
    )


def _evidence(count: int) -> list[Evidence]:
    items = []
    for number in range(count):
        # Every fifth evidence copies the one before it (its text on another site).
        text = _snippet(number - 1 if number % 5 == 4 else number)
        items.append(
            Evidence(
                evidence_id=f"ev-{number:012x}",
                adapter_id="searx",
                provider_type="live_search",
                basis="page_body",
                url=f"https://site{number}.example/a",
                site=f"site{number}.example",
                title="湛江港新航道",
                snippet=text,
                score=9000 - number,
                published_at=date(2026, 11, 25),
                accessed_at=_ACCESSED,
                content_digest="sha256:" + "0" * 64,
                raw_digest="sha256:" + "1" * 64,
            )
        )
    return items


def _median_ms(runs: int, step: Callable[[], object]) -> float:
    samples = []
    for _ in range(runs):
        start = time.process_time()
        step()
        samples.append(time.process_time() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evidence", type=int, default=40)
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args()
    evidence = _evidence(args.evidence)
    ranked = [(item, ()) for item in evidence]
    day = TimeRange(start=date(2026, 11, 1), end=date(2026, 11, 30))
    weather = ExternalQueryPlan(
        question="湛江气温", query_kind="weather", search_queries=("湛江",), location="湛江"
    )
    event = ExternalQueryPlan(
        question="新航道哪天投入使用？",
        search_queries=("湛江港 新航道",),
        entities=("湛江港",),
        time_range=day,
        asked_value="event_date",
    )
    figures = {
        "copy_groups": _median_ms(args.runs, lambda: copy_groups(evidence)),
        "value_conflicts, weather": _median_ms(args.runs, lambda: value_conflicts(weather, ranked)),
        "value_conflicts, event_date": _median_ms(
            args.runs, lambda: value_conflicts(event, ranked)
        ),
    }
    found = (len(copy_groups(evidence)), len(value_conflicts(event, ranked)))
    print(f"{args.evidence} evidence, median CPU of {args.runs} runs (ms)")
    for name, value in figures.items():
        print(f"{name:<30}{value:>9.2f}")
    print(f"copy groups found: {found[0]}; event-date disagreements found: {found[1]}")


if __name__ == "__main__":
    main()
