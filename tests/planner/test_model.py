"""The model-backed structured planner, against a scripted loopback chat endpoint."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service.llm import ChatCompletionsClient
from external_query_service.models import CORE_QUERY_KINDS, QuerySemantics, TimeRange
from external_query_service.planner import LLMPlanner
from external_query_service.planner._structured import Planner, PlannerResult
from external_query_service.testing import LoopbackServer
from tests.support.llm_chat import CHAT_PATH, ChatServer, answer_json, api_error, completion
from tests.support.world import NOW, World, forecast_reply, serve_zhanjiang_geocoding

QUESTION = "湛江明天天气怎么样？"
KEY_ENV = "EQS_TEST_LLM_KEY"
SECRET = "sk-test-planner-2b9e7d1c5a3f"
GOOD_PLAN = {
    "query_kind": "weather",
    "answer_contract": "direct_fact",
    "location": "湛江",
    "entities": ["湛江"],
    "compare_targets": [],
    "time_range": {"start": "2026-12-01", "end": "2026-12-01"},
    "freshness_required": True,
    "language": "zh",
    "search_queries": ["湛江 明天 天气预报"],
    "asked_value": None,
}


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def planner_for(chat: ChatServer, **settings: Any) -> Planner:
    client = ChatCompletionsClient(chat.settings(**settings))
    return Planner(LLMPlanner(client, clock=fixed_clock(NOW)))


def plan(
    planner: Planner, semantics: QuerySemantics | None = None, question: str = QUESTION
) -> PlannerResult:
    return asyncio.run(planner.plan(question, semantics))


def test_a_good_plan_from_the_model_is_used(chat: ChatServer) -> None:
    chat.then(answer_json(GOOD_PLAN))

    result = plan(planner_for(chat))

    assert result.fallback_reason is None
    planned = result.plan
    assert planned.planner_source == "structured"
    assert (planned.query_kind, planned.answer_contract) == ("weather", "direct_fact")
    assert planned.location == "湛江"
    assert planned.time_range == TimeRange(start=date(2026, 12, 1), end=date(2026, 12, 1))
    assert planned.freshness_required is True
    assert planned.search_queries == ("湛江 明天 天气预报",)
    assert planned.asked_value is None


def test_the_model_may_say_the_question_asks_for_an_event_date(chat: ChatServer) -> None:
    question = "Rust 1.80 是哪天发布的？"
    chat.then(
        answer_json(
            {
                **GOOD_PLAN,
                "query_kind": "news",
                "answer_contract": "direct_fact",
                "location": None,
                "entities": ["Rust 1.80"],
                "time_range": None,
                "freshness_required": False,
                "search_queries": ["Rust 1.80 发布日期"],
                "asked_value": "event_date",
            }
        )
    )

    result = plan(planner_for(chat), question=question)

    assert result.fallback_reason is None
    assert result.plan.asked_value == "event_date"
    system, _user = chat.messages()
    assert "asked_value" in system["content"]
    schema = chat.bodies[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["asked_value"] == {
        "type": ["string", "null"],
        "enum": ["event_date", None],
    }


def test_the_model_gets_the_question_as_data_today_and_the_kind_vocabulary(
    chat: ChatServer,
) -> None:
    chat.then(answer_json(GOOD_PLAN))
    upstream = QuerySemantics(location="湛江市")

    plan(planner_for(chat), upstream)

    system, user = chat.messages()
    assert system["role"] == "system"
    assert "2026-11-30" in system["content"]
    assert "+08:00" in system["content"]
    assert json.loads(user["content"]) == {"question": QUESTION, "known": {"location": "湛江市"}}
    schema = chat.bodies[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["query_kind"]["enum"] == [*CORE_QUERY_KINDS, None]
    assert "$ref" not in json.dumps(schema)


def test_upstream_semantics_win_over_the_model(chat: ChatServer) -> None:
    chat.then(answer_json({**GOOD_PLAN, "location": "上海", "query_kind": "news"}))
    upstream = QuerySemantics(query_kind="weather", location="北京")

    result = plan(planner_for(chat), upstream)

    assert result.plan.planner_source == "structured"
    assert (result.plan.query_kind, result.plan.location) == ("weather", "北京")
    assert result.plan.entities == ("湛江",)  # what upstream left open, the model filled


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (completion('{"query_kind": "weather", "location": '), "invalid_json"),
        (completion("明天湛江多云"), "invalid_json"),
        (answer_json({**GOOD_PLAN, "time_range": {"start": "明天", "end": "明天"}}), "schema"),
        (answer_json({**GOOD_PLAN, "freshness_required": "yes"}), "schema_violation"),
        (answer_json({**GOOD_PLAN, "planner_source": "upstream_semantics"}), "schema_violation"),
        (answer_json({**GOOD_PLAN, "query_kind": "horoscope"}), "unknown_query_kind"),
        (answer_json({**GOOD_PLAN, "asked_value": "launch_day"}), "schema_violation"),
        (api_error(500, "model crashed", "api_error"), "http_status"),
        (completion(None, refusal="I cannot plan this."), "refused"),
    ],
)
def test_a_failing_model_falls_back_with_the_reason(
    chat: ChatServer, reply: Any, reason: str
) -> None:
    chat.then(reply)
    upstream = QuerySemantics(query_kind="weather", location="湛江")

    result = plan(planner_for(chat), upstream)

    assert result.plan.planner_source == "upstream_semantics"
    assert (result.plan.query_kind, result.plan.location) == ("weather", "湛江")
    assert result.plan.time_range is None
    assert result.fallback_reason is not None
    assert reason in result.fallback_reason


def test_a_slow_model_times_out_into_the_conservative_plan(chat: ChatServer) -> None:
    slow = answer_json(GOOD_PLAN)
    slow.delay_s = 2.0
    chat.then(slow)

    result = plan(planner_for(chat, timeout_s=0.2))

    assert result.plan.planner_source == "fallback"
    assert (result.plan.query_kind, result.plan.search_queries) == ("generic_web", (QUESTION,))
    assert result.fallback_reason is not None
    assert "timeout" in result.fallback_reason


def test_kinds_declared_by_adapters_join_the_vocabulary(chat: ChatServer) -> None:
    chat.then(answer_json({**GOOD_PLAN, "query_kind": "flight_status"}))
    client = ChatCompletionsClient(chat.settings())
    planner = Planner(
        LLMPlanner(client, kinds=(*CORE_QUERY_KINDS, "flight_status"), clock=fixed_clock(NOW))
    )

    result = plan(planner)

    assert result.fallback_reason is None
    assert result.plan.query_kind == "flight_status"


# --- through the service ----------------------------------------------------------------------


def test_service_audits_the_fallback_reason_and_never_the_api_key(
    chat: ChatServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    chat.then(api_error(401, f"Incorrect API key provided: {SECRET}"))
    caplog.set_level(logging.DEBUG)
    client = ChatCompletionsClient(chat.settings(api_key_env=KEY_ENV))

    with ExternalQueryService(
        Settings(), clock=fixed_clock(NOW), planner=LLMPlanner(client, clock=fixed_clock(NOW))
    ) as service:
        answer = service.answer(QUESTION)

    assert chat.requests_to(CHAT_PATH)[0].headers["authorization"] == f"Bearer {SECRET}"
    (event,) = answer.audit.named("plan")
    reason = str(event.detail["fallback_reason"])
    assert "http_status" in reason
    assert "401" in reason
    assert event.detail["source"] == "fallback"
    assert SECRET not in answer.model_dump_json()
    assert SECRET not in caplog.text


def test_service_with_a_good_model_plan_answers_from_the_fact_api(
    loopback: LoopbackServer, chat: ChatServer
) -> None:
    world = World(loopback)
    serve_zhanjiang_geocoding(world)
    world.forecast(forecast_reply)
    chat.then(answer_json(GOOD_PLAN))
    client = ChatCompletionsClient(chat.settings())

    with ExternalQueryService(
        world.settings(world.open_meteo()),
        clock=fixed_clock(NOW),
        planner=LLMPlanner(client, clock=fixed_clock(NOW)),
    ) as service:
        answer = service.answer(QUESTION)  # no query_semantics: the model planned it all

    assert answer.plan.planner_source == "structured"
    assert answer.status == "answered"
    assert answer.answer_contract == "direct_fact"
    assert answer.attempts[0].provider_type == "fact_api"
    assert "24.1" in answer.text
