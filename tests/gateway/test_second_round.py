"""One more bounded search round when the first leaves a compare target without evidence,
too few sources or an unsettled disagreement; its queries come from the plan's fields."""

from __future__ import annotations

import asyncio
from datetime import date
from typing import Any

import pytest

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service._audit import AuditLog
from external_query_service.errors import SettingsError
from external_query_service.gateway._gateway import Gateway
from external_query_service.gateway._second_round import second_round_queries
from external_query_service.models import (
    ExternalQueryPlan,
    GatherResult,
    TimeRange,
    ValueConflict,
    VerifierResult,
)
from external_query_service.testing import LoopbackServer
from tests.support.world import NOW, World, article, hit

QUESTION = "湛江港和茂名港今年的货物吞吐量谁更大？"
COMPARE = {"query_kind": "news", "compare_targets": ["湛江港", "茂名港"]}
NETWORK = {"deadline_s": 60.0, "timeout_s": 20.0}  # a loaded machine; nothing here is timing


def compare_world(world: World) -> tuple[str, str]:
    """Zhanjiang's page answers the question's searches; Maoming's only a query naming it
    without the question's other words."""
    zhanjiang = world.page(
        "port-a.test",
        "/zj",
        article(
            "湛江港吞吐量",
            ["湛江港今年货物吞吐量达2.6亿吨，同比增长百分之八。"],
            published="2026-11-20",
        ),
    )
    maoming = world.page(
        "port-b.test",
        "/mm",
        article(
            "茂名港吞吐量",
            ["茂名港今年货物吞吐量约4000万吨，油品运输占比较高。"],
            published="2026-11-22",
        ),
    )
    for query in (QUESTION, f"{QUESTION} 湛江港", f"{QUESTION} 茂名港"):
        world.results(query, [hit(zhanjiang, "湛江港吞吐量", "湛江港货物吞吐量")])
    world.results("茂名港 news", [hit(maoming, "茂名港吞吐量", "茂名港货物吞吐量")])
    return zhanjiang, maoming


def ask(world: World, **gateway: Any) -> Any:
    settings = world.settings(world.searxng(), network=NETWORK, gateway=gateway)
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        return service.answer(QUESTION, COMPARE)


def searched(world: World) -> list[str]:
    return [r.query["q"][0] for r in world.requests if "q" in r.query]


def test_a_compare_target_missing_from_the_first_round_is_found_in_round_two(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    zhanjiang, maoming = compare_world(world)

    answer = ask(world)

    assert answer.status == "answered"
    assert {item.url for item in answer.evidence} == {zhanjiang, maoming}
    assert "4000万吨" in answer.text
    (second,) = answer.audit.named("second_round")
    assert second.detail["round"] == 2
    assert second.detail["queries"] == ["茂名港 news"]
    assert second.detail["after"]["missing_targets"] == ["茂名港"]
    round_two = [e for e in answer.audit.named("attempt") if e.detail.get("round") == 2]
    assert [e.detail["adapter_id"] for e in round_two] == ["searx"]
    assert searched(world)[-1] == "茂名港 news"
    assert len(answer.attempts) == 2  # one per round


def test_with_second_round_off_the_missing_target_is_insufficient_evidence(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    compare_world(world)

    answer = ask(world, second_round=False)

    assert (answer.status, answer.reason) == ("insufficient_evidence", "insufficient_sources")
    assert answer.verifier.missing_targets == ("茂名港",)
    assert answer.audit.named("second_round") == ()
    assert "茂名港 news" not in searched(world)


def test_an_answered_question_runs_no_second_round(loopback: LoopbackServer) -> None:
    world = World(loopback)
    compare_world(world)
    world.results(f"{QUESTION} 茂名港", [hit(world.url("port-b.test", "/mm"), "茂名港", "茂名港")])

    answer = ask(world)

    assert answer.status == "answered"
    assert answer.audit.named("second_round") == ()


def test_the_second_round_keeps_to_the_question_deadline(loopback: LoopbackServer) -> None:
    world = World(loopback)
    compare_world(world)
    compare = plan(**COMPARE, answer_contract="compare_with_sources")
    settings = world.settings(world.searxng(), network=NETWORK)

    async def rounds(gateway: Gateway) -> GatherResult:
        audit = AuditLog()
        first = await gateway.gather(compare, audit)
        # The question's deadline has passed by the time round 2 would start.
        spent = asyncio.get_running_loop().time()
        return await gateway.gather_more(first, ["茂名港 news"], audit, deadline=spent)

    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        gathered = asyncio.run(rounds(service.gateway))

    first, second = gathered.attempts
    assert first.status == "ok"
    assert (second.status, second.reason) == ("skipped", "deadline_exceeded")
    assert "茂名港 news" not in searched(world)


def test_the_gateway_section_is_validated() -> None:
    assert Settings().gateway.second_round is True
    assert Settings.from_toml("[gateway]\nsecond_round = false\n").gateway.second_round is False
    with pytest.raises(SettingsError, match="gateway"):
        Settings.from_toml("[gateway]\nsecond_rounds = true\n")


# --- the queries, from the plan's fields only ----------------------------------------------


def plan(**fields: Any) -> ExternalQueryPlan:
    base: dict[str, Any] = {"question": QUESTION, "search_queries": (QUESTION,)}
    return ExternalQueryPlan(**{**base, **fields})


@pytest.mark.parametrize(
    ("the_plan", "verdict", "queries"),
    [
        (
            plan(query_kind="news", compare_targets=("湛江港", "茂名港")),
            VerifierResult(
                status="insufficient_evidence",
                reason="insufficient_sources",
                missing_targets=("茂名港",),
            ),
            ("茂名港 news",),
        ),
        (
            plan(
                query_kind="weather",
                location="湛江",
                time_range=TimeRange(start=date(2026, 12, 1), end=date(2026, 12, 1)),
            ),
            VerifierResult(status="insufficient_evidence", reason="insufficient_sources"),
            ("湛江 weather 2026-12-01",),
        ),
        (
            plan(query_kind="exchange_rate", entities=("USD", "CNY")),
            VerifierResult(
                status="insufficient_evidence",
                reason="conflicting_evidence",
                conflicts=(
                    ValueConflict(
                        subject="exchange_rate",
                        evidence_ids=("ev-aaaaaaaaaaaa", "ev-bbbbbbbbbbbb"),
                        values=("7.1", "7.3"),
                    ),
                ),
            ),
            ("USD CNY exchange rate",),
        ),
        (  # two dates for the event asked: its subject and the value disputed
            plan(query_kind="news", entities=("Rust 1.80",), asked_value="event_date"),
            VerifierResult(
                status="insufficient_evidence",
                reason="conflicting_evidence",
                conflicts=(
                    ValueConflict(
                        subject="event_date",
                        evidence_ids=("ev-aaaaaaaaaaaa", "ev-bbbbbbbbbbbb"),
                        values=("2024-07-25", "2024-07-18"),
                    ),
                ),
            ),
            ("Rust 1.80 event date",),
        ),
        (
            plan(entities=("湛江港",)),  # generic_web: no kind term
            VerifierResult(status="insufficient_evidence", reason="insufficient_sources"),
            ("湛江港",),
        ),
        (  # a slot's subject is the words shared around it, searched as words
            plan(),
            VerifierResult(
                status="answered",
                conflicts=(
                    ValueConflict(
                        subject="馆内共有…个座位",
                        evidence_ids=("ev-aaaaaaaaaaaa", "ev-bbbbbbbbbbbb"),
                        values=("70", "170"),
                    ),
                ),
            ),
            ("馆内共有 个座位",),
        ),
        (  # an answered question in parts with a part no evidence covers: that part's own
            plan(question="2025年比亚迪和特斯拉的销量分别是多少？"),
            VerifierResult(status="answered", missing_parts=("特斯拉",)),
            ("2025年特斯拉的销量分别是多少？",),
        ),
        (  # the same with a preposition the question reads as a conjunction
            plan(question="2020年甲公司与乙公司的销量分别是多少？"),
            VerifierResult(status="answered", missing_parts=("乙公司",)),
            ("2020年乙公司的销量分别是多少？",),
        ),
        (plan(entities=("x",)), VerifierResult(status="answered"), ()),
        (
            plan(entities=("x",)),
            VerifierResult(status="insufficient_evidence", reason="all_providers_failed"),
            (),
        ),
        (plan(entities=("x",)), VerifierResult(status="clarify", reason="missing_slot"), ()),
        (  # a query the first round already sent is not sent again
            plan(query_kind="news", entities=("湛江港",), search_queries=("湛江港 news",)),
            VerifierResult(status="insufficient_evidence", reason="insufficient_sources"),
            (),
        ),
    ],
)
def test_second_round_queries_are_built_from_the_plan(
    the_plan: ExternalQueryPlan, verdict: VerifierResult, queries: tuple[str, ...]
) -> None:
    assert second_round_queries(the_plan, verdict) == queries
