"""The answer chain bound as admission records (receipts from the chain)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from external_query_service.admission import (
    ChainRecord,
    bind_answer,
    check_receipt,
    project,
    service_envelope,
    verify_admission,
    verify_plan,
)
from external_query_service.admission._canonical import canonical_json
from external_query_service.models import (
    AdapterAttempt,
    Evidence,
    EvidenceDecision,
    ExternalQueryPlan,
    GatherResult,
    RankedAdapter,
    VerifierResult,
)
from external_query_service.settings import AdapterSettings, Settings
from external_query_service.storage import SQLiteLedger as Ledger

NOW = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
QUESTION = "湛江明天天气怎么样？"
WEATHER_URL = "https://api.open-meteo.example/v1/forecast?latitude=21.27"
NEWS_URL = "https://news.example.cn/zhanjiang weather"


def evidence(evidence_id: str, adapter_id: str, url: str, **overrides: Any) -> Evidence:
    values: dict[str, Any] = {
        "evidence_id": evidence_id,
        "adapter_id": adapter_id,
        "provider_type": "fact_api",
        "basis": "fact_api",
        "url": url,
        "title": "湛江 forecast",
        "site": "open-meteo.example",
        "snippet": "湛江 2026-03-02：小雨，\n18–24 °C",
        "score": 9100,
        "published_at": date(2026, 3, 1),
        "accessed_at": NOW - timedelta(seconds=5),
        "content_digest": "sha256:" + "ab" * 32,
        "raw_digest": "sha256:" + "cd" * 32,
    }
    values.update(overrides)
    return Evidence(**values)


def gathered() -> GatherResult:
    plan = ExternalQueryPlan(
        question=QUESTION,
        query_kind="weather",
        answer_contract="direct_fact",
        search_queries=(QUESTION,),
        location="湛江",
        planner_source="upstream_semantics",
    )
    ranking = (
        RankedAdapter(adapter_id="meteo", provider_type="fact_api", rank=1, reason="fact api"),
        RankedAdapter(adapter_id="searx", provider_type="live_search", rank=2, reason="search"),
        RankedAdapter(adapter_id="searx2", provider_type="live_search", rank=3, reason="search"),
        RankedAdapter(adapter_id="backup", provider_type="live_search", rank=4, reason="search"),
        RankedAdapter(
            adapter_id="off",
            provider_type="live_search",
            rank=None,
            reason="not ready: disabled",
            excluded="not_ready",
            readiness_reason="disabled",
        ),
    )
    attempts = (
        AdapterAttempt(adapter_id="meteo", provider_type="fact_api", status="ok", rank=1),
        AdapterAttempt(adapter_id="searx", provider_type="live_search", status="ok", rank=2),
        AdapterAttempt(adapter_id="searx2", provider_type="live_search", status="empty", rank=3),
        AdapterAttempt(
            adapter_id="backup",
            provider_type="live_search",
            status="timeout",
            rank=4,
            reason="deadline_exceeded",
        ),
        AdapterAttempt(
            adapter_id="off",
            provider_type="live_search",
            status="skipped",
            reason="not ready: disabled",
        ),
    )
    found = (
        evidence("ev-meteo1", "meteo", WEATHER_URL),
        evidence(
            "ev-news1",
            "searx",
            NEWS_URL,
            provider_type="live_search",
            basis="search_snippet",
            site="news.example.cn",
            published_at=None,
        ),
    )
    return GatherResult(plan=plan, ranking=ranking, attempts=attempts, gathered=found)


def verdict(admit_news: bool = False) -> VerifierResult:
    accepted = [EvidenceDecision(evidence_id="ev-meteo1", decision="admit", reason="ok")]
    rejected = []
    news = EvidenceDecision(
        evidence_id="ev-news1",
        decision="admit" if admit_news else "reject",
        reason="ok" if admit_news else "out_of_time_range",
    )
    (accepted if admit_news else rejected).append(news)
    return VerifierResult(status="answered", accepted=tuple(accepted), rejected=tuple(rejected))


def settings() -> Settings:
    return Settings.model_validate(
        {
            "network": {"timeout_s": 2.5, "allowed_networks": ["10.0.0.0/8"]},
            "adapters": [
                AdapterSettings.model_validate(
                    {"kind": "open_meteo", "id": "meteo", "ratio": 0.25}
                ).model_dump()
            ],
        }
    )


def bind(**overrides: Any) -> ChainRecord:
    gather = overrides.pop("gathered", gathered())
    values: dict[str, Any] = {
        "question": QUESTION,
        "plan": gather.plan,
        "gathered": gather,
        "verifier": verdict(),
        "envelope": service_envelope(settings()),
        "presented_urls": [WEATHER_URL],
        "decided_at": NOW,
    }
    values.update(overrides)
    return bind_answer(**values)


def test_every_attempt_but_a_skipped_one_gets_a_plan_selecting_exactly_that_adapter() -> None:
    record = bind()
    assert [link.adapter_id for link in record.links] == ["meteo", "searx", "searx2", "backup"]
    for link in record.links:
        assert link.plan.selected_provider.provider_id == link.adapter_id
        assert verify_plan(json.loads(link.plan.model_dump_json())) == link.plan
    request = record.links[0].plan.request
    assert (request.objective, request.user_activity, request.decision) == (
        QUESTION,
        "answer_external_question",
        "direct_fact",
    )
    assert request.evidence_kinds == ("weather",)
    assert len(set(record.plan_ids)) == 4


def test_attempt_statuses_map_to_receipt_statuses() -> None:
    record = bind()
    assert [(link.attempt_status, link.receipt.status) for link in record.links] == [
        ("ok", "succeeded"),
        ("ok", "succeeded"),
        ("empty", "no_evidence"),
        ("timeout", "failed"),
    ]
    assert record.links[3].receipt.sources == ()
    assert "attempt reason: deadline_exceeded" in record.links[3].receipt.limitations


def test_receipt_sources_carry_the_evidence_provenance() -> None:
    source = bind().links[0].receipt.sources[0]
    assert source.source_ref == "ev-meteo1"
    assert source.url == WEATHER_URL
    assert (source.source_family, source.basis) == ("fact_api", "fact_api")
    assert source.finding == "湛江 2026-03-02：小雨， 18–24 °C"
    assert source.publication_date == "2026-03-01"
    assert source.accessed_at == "2026-03-01T09:59:55+00:00"
    assert source.content_digest == "sha256:" + "ab" * 32


def test_chain_records_pass_the_same_checks_as_caller_records() -> None:
    for link in bind().links:
        plan = json.loads(link.plan.model_dump_json())
        receipt = json.loads(json.dumps(link.receipt.hashed()))
        assert check_receipt(plan, receipt).receipt_digest == link.receipt_digest
        assert verify_admission(json.loads(link.admission.model_dump_json())) == link.admission
        project(plan, receipt, link.admission)


def test_verifier_decisions_become_admissions_decided_by_the_verifier() -> None:
    record = bind()
    meteo, searx, empty, failed = (link.admission for link in record.links)
    assert (meteo.decided_by, meteo.decision, meteo.admitted_source_refs) == (
        "verifier",
        "admit",
        ("ev-meteo1",),
    )
    assert searx.decision == "reject"
    assert [(item.source_ref, item.reason) for item in searx.source_decisions] == [
        ("ev-news1", "out_of_time_range")
    ]
    assert (empty.decision, failed.decision) == ("reject", "reject")


def test_retirement_is_ready_when_every_admitted_source_was_presented() -> None:
    record = bind()
    assert record.retirement.ready
    assert record.downstream_source_refs == ("ev-meteo1",)
    assert [link.retirement.state for link in record.links] == ["retired"] * 4


def test_an_admitted_source_left_out_of_the_answer_keeps_retirement_waiting() -> None:
    record = bind(verifier=verdict(admit_news=True), presented_urls=[WEATHER_URL])
    assert not record.retirement.ready
    assert record.retirement.reasons == ("searx:not_read_back:ev-news1",)
    # The presenter shows URLs with whitespace percent-encoded; that still counts.
    shown = bind(
        verifier=verdict(admit_news=True),
        presented_urls=[WEATHER_URL, NEWS_URL.replace(" ", "%20")],
    )
    assert shown.retirement.ready


def test_plan_ids_hold_no_clock_value() -> None:
    early, late = bind(decided_at=NOW), bind(decided_at=NOW + timedelta(hours=3))
    assert early.plan_ids == late.plan_ids
    # Receipts do hold times (completed_at), so their digests move with the clock.
    assert early.receipt_digests != late.receipt_digests
    assert early.links[0].receipt.completed_at == "2026-03-01T10:00:00+00:00"


def test_hashed_records_hold_no_floats() -> None:
    record = bind()
    envelope = record.links[0].plan.envelope
    assert envelope["budgets"] == {  # type: ignore[comparison-overlap]
        "timeout_ms": 2500,
        "deadline_ms": 20000,
        "max_page_bytes": 2000000,
        "max_pages": 5,
    }
    assert envelope["adapters"]["meteo"]["options"] == {"ratio": "0.25"}  # type: ignore[index,call-overload]
    for link in record.links:
        canonical_json(link.plan.model_dump(mode="json"))
        canonical_json(link.receipt.hashed())
        canonical_json(link.admission.model_dump(mode="json"))


def test_audit_detail_exposes_ids_and_readiness() -> None:
    record = bind()
    detail = record.audit_detail()
    assert detail["plan_ids"] == list(record.plan_ids)
    assert detail["receipt_digests"] == list(record.receipt_digests)
    assert detail["retirement_ready"] is True
    json.dumps(record.model_dump(mode="json"))  # the whole record is JSON for the audit


def test_persisting_a_chain_twice_stores_it_once(tmp_path: Path) -> None:
    record = bind()
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        first = ledger.persist_chain(record)
        second = ledger.persist_chain(record)
        assert all(item.inserted for item in first)
        assert not any(item.inserted for item in second)
        assert ledger.count("plan") == 4
        assert ledger.count("admission") == 4
        assert ledger.count("chain") == 1
        assert ledger.verify().ok


def test_an_attempt_whose_evidence_was_deduplicated_away_reports_no_evidence() -> None:
    gather = gathered()
    only_meteo = gather.model_copy(update={"gathered": gather.gathered[:1]})
    record = bind(gathered=only_meteo)
    assert record.links[1].receipt.status == "no_evidence"


@pytest.mark.parametrize("status", ["insufficient_evidence", "clarify"])
def test_sources_the_verifier_never_judged_are_recorded_as_rejected(status: str) -> None:
    record = bind(verifier=VerifierResult(status=status, reason="missing_slot"))  # type: ignore[arg-type]
    decisions = record.links[0].admission.source_decisions
    assert [(item.decision, item.reason) for item in decisions] == [("reject", "not_judged")]
