"""Plans, evidence and gather results the verifier tests hand the verifier, and running it
at a fixed "now"."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

from external_query_service.models import (
    AdapterAttempt,
    AttemptStatus,
    Evidence,
    ExternalQueryPlan,
    Finding,
    GatherResult,
    RankedAdapter,
    TimeRange,
)
from external_query_service.settings import Settings
from external_query_service.verifier import Verifier, VerifierOutcome

#: When the verifier runs, and the day the made plans and evidence are about.
NOW = datetime(2024, 5, 11, 4, 0, tzinfo=UTC)
TOMORROW = date(2024, 5, 12)


def evidence(n: int = 1, *, url: str = "", **changes: Any) -> Evidence:
    """Dated page evidence number ``n`` about tomorrow's weather in Zhanjiang, on a site of
    its own (``changes`` replace fields)."""
    fields: dict[str, Any] = {
        "evidence_id": f"ev-{n}",
        "adapter_id": "searx",
        "provider_type": "live_search",
        "basis": "page_body",
        "url": url or f"https://news-{n}.test/weather",
        "site": f"news-{n}.test",
        "title": "湛江天气预报",
        "snippet": "湛江市明天多云，气温 26 到 31 度",
        "score": 8000,
        "published_at": date(2024, 5, 11),
        "about_dates": (TOMORROW,),
        "accessed_at": NOW,
        "content_digest": "sha256:" + "0" * 64,
        "raw_digest": "sha256:" + "1" * 64,
    }
    fields.update(changes)
    return Evidence(**fields)


def plan(**changes: Any) -> ExternalQueryPlan:
    """The plan of "Zhanjiang's weather tomorrow" (``changes`` replace fields)."""
    fields: dict[str, Any] = {
        "question": "湛江明天天气怎么样？",
        "query_kind": "weather",
        "answer_contract": "direct_fact",
        "search_queries": ("湛江 明天 天气",),
        "location": "湛江",
        "time_range": TimeRange(start=TOMORROW, end=TOMORROW),
    }
    fields.update(changes)
    return ExternalQueryPlan(**fields)


def attempt(adapter_id: str = "searx", status: AttemptStatus = "ok") -> AdapterAttempt:
    """One live-search adapter attempt."""
    return AdapterAttempt(adapter_id=adapter_id, provider_type="live_search", status=status)


def gathered(
    the_plan: ExternalQueryPlan | None = None,
    items: Sequence[Evidence] = (),
    *,
    attempts: Sequence[AdapterAttempt] = (),
    ranks: Sequence[int | None] = (1,),
    findings: Sequence[Finding] = (),
) -> GatherResult:
    """What the gateway gathered for ``the_plan``: ``items``, one adapter per entry of
    ``ranks`` (``None``: excluded, not ready)."""
    ranking = tuple(
        RankedAdapter(
            adapter_id=f"a{i}",
            provider_type="live_search",
            rank=rank,
            reason="test",
            excluded=None if rank is not None else "not_ready",
        )
        for i, rank in enumerate(ranks)
    )
    return GatherResult(
        plan=the_plan or plan(),
        ranking=ranking,
        attempts=tuple(attempts) or (attempt(),),
        gathered=tuple(items),
        findings=tuple(findings),
    )


def verify(result: GatherResult, **settings: Any) -> VerifierOutcome:
    """The verifier's outcome for ``result`` at ``NOW``, under ``settings`` (a mapping's
    sections)."""
    return Verifier(Settings.from_mapping(settings)).verify(result, now=NOW)
