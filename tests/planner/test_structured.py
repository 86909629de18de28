"""The planner maps structured fields only; a failing structured planner falls back."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from external_query_service.models import QuerySemantics, TimeRange
from external_query_service.planner._structured import (
    Planner,
    PlannerResult,
    default_contract,
)
from external_query_service.text._language import detect_language

WEATHER_WORDS = "北京明天天气怎么样？会下雨吗？"


def plan(planner: Planner, question: str, semantics: Any = None) -> PlannerResult:
    return asyncio.run(planner.plan(question, semantics))


def test_fallback_without_semantics_never_guesses_from_the_question() -> None:
    result = plan(Planner(), WEATHER_WORDS)
    assert result.plan.query_kind == "generic_web"
    assert result.plan.answer_contract == "summary_with_sources"
    assert result.plan.search_queries == (WEATHER_WORDS,)
    assert result.plan.location is None
    assert result.plan.time_range is None
    assert result.plan.planner_source == "fallback"
    assert result.fallback_reason == "no structured planner"


def test_upstream_semantics_are_reused_and_imply_the_contract() -> None:
    semantics = QuerySemantics(query_kind="weather", location="北京")
    result = plan(Planner(), WEATHER_WORDS, semantics)
    assert result.plan.planner_source == "upstream_semantics"
    assert result.plan.answer_contract == "direct_fact"
    assert result.plan.location == "北京"


@pytest.mark.parametrize(
    ("kind", "targets", "contract"),
    [
        ("weather", (), "direct_fact"),
        ("exchange_rate", (), "direct_fact"),
        ("news", (), "summary_with_sources"),
        ("weather", ("北京", "上海"), "compare_with_sources"),
    ],
)
def test_default_contract_follows_structured_fields(
    kind: str, targets: tuple[str, ...], contract: str
) -> None:
    assert default_contract(kind, targets) == contract


def test_compare_targets_each_get_a_search_query() -> None:
    semantics = QuerySemantics(compare_targets=("比亚迪", "特斯拉"))
    result = plan(Planner(), "销量对比", semantics)
    assert result.plan.search_queries == ("销量对比", "销量对比 比亚迪", "销量对比 特斯拉")


def test_structured_plan_is_used_and_upstream_semantics_win() -> None:
    def structured(question: str, semantics: QuerySemantics | None) -> str:
        return json.dumps({"query_kind": "weather", "location": "上海", "entities": ["上海"]})

    result = plan(Planner(structured), WEATHER_WORDS, QuerySemantics(location="北京"))
    assert result.plan.planner_source == "structured"
    assert result.plan.query_kind == "weather"
    assert result.plan.location == "北京"
    assert result.plan.entities == ("上海",)
    assert result.fallback_reason is None


def test_async_structured_planner_is_awaited() -> None:
    async def structured(question: str, semantics: QuerySemantics | None) -> dict[str, Any]:
        return {"query_kind": "news"}

    assert plan(Planner(structured), "q").plan.query_kind == "news"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("not json", "not JSON"),
        ('["a list"]', "not an object"),
        ('{"query_kind": "weather", "mood": "sunny"}', "unknown fields: mood"),
        ('{"time_range": {"start": "2026-12-02", "end": "2026-12-01"}}', "structured plan invalid"),
    ],
)
def test_invalid_structured_output_falls_back_with_the_reason(reply: str, reason: str) -> None:
    result = plan(Planner(lambda q, s: reply), WEATHER_WORDS)
    assert result.plan.planner_source == "fallback"
    assert result.plan.query_kind == "generic_web"
    assert reason in (result.fallback_reason or "")


def test_crashing_structured_planner_falls_back_to_upstream_semantics() -> None:
    def structured(question: str, semantics: QuerySemantics | None) -> str:
        raise ConnectionError("model unreachable")

    result = plan(Planner(structured), "q", QuerySemantics(query_kind="news"))
    assert result.plan.planner_source == "upstream_semantics"
    assert "model unreachable" in (result.fallback_reason or "")


def test_follow_up_carries_targets_and_time_range() -> None:
    planner = Planner()
    span = TimeRange.model_validate({"start": "2026-11-01", "end": "2026-11-30"})
    first = plan(planner, "湛江台风", QuerySemantics(location="湛江", time_range=span)).plan
    follow = planner.plan_follow_up("再查一下", first).plan
    assert follow.planner_source == "follow_up"
    assert (follow.location, follow.time_range) == ("湛江", span)
    assert follow.search_queries == ("再查一下", "湛江台风")


def test_the_value_asked_comes_from_structured_fields_and_carries_into_a_follow_up() -> None:
    planner = Planner()
    asked = QuerySemantics(entities=["台风摩羯"], asked_value="event_date")
    first = plan(planner, "台风摩羯哪天登陆？", asked).plan
    assert first.asked_value == "event_date"
    assert planner.plan_follow_up("再查一下", first).plan.asked_value == "event_date"
    # Without the field, no question's words make it ask for a date.
    assert plan(planner, "台风摩羯哪天登陆？").plan.asked_value is None


_WORDS = st.sampled_from(
    ["北京", "湛江", "明天", "今天", "天气", "下雨", "汇率", "美元", "新闻", "股价",
     "2026年12月1日", "weather", "tomorrow", "USD", "news", "Apple", "对比", "和", "？", " "]
)  # fmt: skip


@settings(max_examples=200)
@given(
    (st.lists(_WORDS, min_size=1, max_size=12).map("".join) | st.text(max_size=80)).filter(
        str.strip
    )
)
def test_without_structured_fields_no_question_changes_the_plan_but_its_text(
    question: str,
) -> None:
    # Whatever words the question holds (weather, dates, currencies, places, news), the
    # fallback plans the same way: nothing reads the question to guess kind, time or place.
    result = plan(Planner(), question)
    # The one thing the text decides is its language, from its script (not its words).
    assert result.plan.language == detect_language(question)
    assert result.plan.model_dump(exclude={"question", "search_queries", "language"}) == {
        "query_kind": "generic_web",
        "answer_contract": "summary_with_sources",
        "entities": (),
        "compare_targets": (),
        "location": None,
        "time_range": None,
        "freshness_required": False,
        "asked_value": None,
        "planner_source": "fallback",
    }
    assert result.plan.search_queries == (question.strip(),)
