"""The wiring builds only what the settings ask for, uses the parts a caller hands it, and
asks the configured backends for real."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from external_query_service import Settings, fixed_clock
from external_query_service._evidence_store import EvidenceStore
from external_query_service._wiring import build_components
from external_query_service.models import CORE_QUERY_KINDS, QuerySemantics, Readiness
from external_query_service.net._fetch import HttpRuntime
from external_query_service.planner import LLMPlanner

CLOCK = fixed_clock(datetime(2026, 11, 30, 2, tzinfo=UTC))

#: A model endpoint nothing listens on: building its client must not call it.
LLM = {"base_url": "http://127.0.0.1:9/v1", "model": "scripted"}


def test_default_settings_build_no_optional_part() -> None:
    parts = build_components(Settings(), clock=CLOCK)
    try:
        assert (parts.shared_cache, parts.ledger, parts.browser) == (None, None, None)
        assert (parts.llm, parts.llm_presenter, parts.planner.structured) == (None, None, None)
        assert parts.gateway.adapters == {}
        assert parts.query_kinds == tuple(CORE_QUERY_KINDS)
    finally:
        parts.close()


def test_the_parts_a_caller_hands_over_are_used_as_they_are() -> None:
    settings = Settings()
    store = EvidenceStore(1 << 20)
    http = HttpRuntime(settings.network, clock=CLOCK)
    parts = build_components(settings, clock=CLOCK, store=store, http=http)
    try:
        assert parts.store is store
        assert parts.http is http
    finally:
        parts.close()
        asyncio.run(http.aclose())


def test_a_configured_model_plans_and_presents_unless_a_planner_is_given() -> None:
    settings = Settings.model_validate({"llm": LLM})
    parts = build_components(settings, clock=CLOCK)
    assert isinstance(parts.planner.structured, LLMPlanner)
    assert parts.llm is not None
    assert parts.llm_presenter is not None
    parts.close()

    def hook(question: str, semantics: QuerySemantics | None) -> dict[str, str]:
        return {}

    given = build_components(settings, clock=CLOCK, planner=hook)
    assert given.planner.structured is hook  # an explicit hook wins over the model's
    assert given.llm_presenter is not None  # the model still presents
    given.close()


def test_a_configured_ledger_is_really_asked_for_its_schema(tmp_path: Path) -> None:
    settings = Settings.model_validate({"ledger": {"path": str(tmp_path / "ledger.sqlite3")}})
    parts = build_components(settings, clock=CLOCK)
    try:
        assert parts.ledger is not None
        assert asyncio.run(parts.probe_backends()) == {"ledger": Readiness(ready=True)}
    finally:
        parts.close()
    assert (tmp_path / "ledger.sqlite3").is_file()


def test_the_analysis_memo_is_built_where_the_service_is_wired_not_in_the_adapter_contract() -> (
    None
):
    import external_query_service._wiring as wiring
    import external_query_service.adapters._base as contract

    assert "analysis_memo" in wiring.__all__
    assert not hasattr(contract, "analysis_memo")
