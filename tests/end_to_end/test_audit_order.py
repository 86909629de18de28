"""The audit of one question, event by event: which stage recorded what, in which order,
with which fields, for an answered, a refused and a clarify question."""

from __future__ import annotations

from typing import Any

import pytest

from external_query_service.models import ExternalAnswer, PlannerResult, VerifierOutcome
from external_query_service.testing import LoopbackServer, World, article, hit
from tests.support.world import NOW, RECENT, make_service, stale_world

WEATHER_QUESTION = "湛江明天天气怎么样？"
WEATHER = {
    "query_kind": "weather",
    "location": "湛江",
    "time_range": {"start": "2026-12-01", "end": "2026-12-01"},
}


@pytest.fixture
def world(loopback: LoopbackServer) -> World:
    return World(loopback, now=NOW)


def order(answer: ExternalAnswer) -> list[tuple[str, str, tuple[str, ...]]]:
    """Each event as (stage, name, its detail's keys in order)."""
    return [(item.stage, item.event, tuple(item.detail)) for item in answer.audit.events]


def ask(world: World, question: str, semantics: dict[str, Any]) -> ExternalAnswer:
    with make_service(world, world.searxng()) as service:
        return service.answer(question, semantics)


def answered(world: World) -> ExternalAnswer:
    url = world.page(
        "weather-a.test",
        "/zhanjiang/forecast",
        article(
            "湛江市天气预报",
            ["湛江市气象台11月30日发布：12月1日湛江市多云转阴，最高气温24℃，最低气温18℃。"],
            published="2026-11-30",
        ),
    )
    world.results(WEATHER_QUESTION, [hit(url, "湛江天气频道", "湛江天气频道首页", "2026-11-30")])
    return ask(world, WEATHER_QUESTION, WEATHER)


def refused(world: World) -> ExternalAnswer:
    return ask(world, stale_world(world), RECENT)


def clarify(world: World) -> ExternalAnswer:
    question = "明天天气怎么样？"
    urls = [
        world.page(
            f"{city}.test",
            "/forecast",
            article(f"{name}天气预报", [f"{name}明天多云转晴，最高气温24℃，最低气温18℃。"]),
        )
        for city, name in (("zhanjiang", "湛江"), ("maoming", "茂名"))
    ]
    world.results(question, [hit(url, "天气预报", "明天天气") for url in urls])
    return ask(world, question, {"query_kind": "weather"})


QUESTION = ("service", "question", ("question", "route_mode"))
PLAN = ("planner", "plan", ("source", "fallback_reason", "follows", "plan"))
RANK = ("gateway", "rank", ("ranking",))
ATTEMPT = (
    "gateway",
    "attempt",
    (
        "adapter_id",
        "provider_type",
        "status",
        "reason",
        "rank",
        "results",
        "pages_fetched",
        "pages_failed",
        "bytes_fetched",
        "evidence_count",
        "duration_ms",
        "failure",
        "source",
        "cause",
        "page_failures",
        "unresponsive_engines",
    ),
)
CHECK = ("verifier", "check", ("check", "passed", "reason", "detail", "evidence_id"))
OUTCOME = (
    "verifier",
    "outcome",
    ("status", "reason", "admitted", "rejected", "missing_targets", "conflicts", "copies"),
)
RENDER = (
    "presenter",
    "render",
    (
        "template",
        "prompt_template",
        "prompt_digest",
        "renderer",
        "fallback_reason",
        "sources",
        "sentences",
        "answerability",
    ),
)
ADMISSION = (
    "service",
    "admission",
    (
        "persisted",
        "request_id",
        "plan_ids",
        "receipt_digests",
        "admission_ids",
        "admissions",
        "downstream_source_refs",
        "retirement_ready",
        "retirement_reasons",
    ),
)


@pytest.mark.parametrize(
    ("scenario", "status", "reason", "checks"),
    [
        (answered, "answered", None, 5),
        (refused, "insufficient_evidence", "out_of_time_range", 5),
        (clarify, "clarify", "missing_slot", 8),
    ],
    ids=["answered", "refused", "clarify"],
)
def test_the_audit_of_one_question_keeps_its_stage_order(
    world: World, scenario: Any, status: str, reason: str | None, checks: int
) -> None:
    answer = scenario(world)

    assert (answer.status, answer.reason) == (status, reason)
    assert order(answer) == [
        QUESTION,
        PLAN,
        RANK,
        ATTEMPT,
        *[CHECK] * checks,
        OUTCOME,
        RENDER,
        ADMISSION,
    ]
    assert [event.seq for event in answer.audit.events] == list(range(1, len(order(answer)) + 1))
    verdict = answer.audit.named("outcome")[0].detail
    assert (verdict["status"], verdict["reason"]) == (status, reason)
    assert answer.audit.named("render")[0].detail["sources"] == len(answer.sources)


def test_the_verifier_and_the_presenter_events_are_their_results_own(world: World) -> None:
    answer = answered(world)
    shown = [(item.stage, item.event, dict(item.detail)) for item in answer.audit.events]
    outcome = VerifierOutcome(
        result=answer.verifier, admitted=answer.evidence, uncertainties=answer.uncertainties
    )
    verifier = [tuple(item) for item in outcome.audit_events()]
    assert shown[4 : 4 + len(verifier)] == verifier
    planned = PlannerResult(plan=answer.plan, fallback_reason="no structured planner")
    assert [shown[1]] == list(planned.audit_events())
    render = shown[-2]
    assert render[:2] == ("presenter", "render")
    assert render[2]["sources"] == len(answer.sources)
