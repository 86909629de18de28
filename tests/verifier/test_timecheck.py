from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from external_query_service.errors import InputError
from external_query_service.models import Evidence, ExternalQueryPlan, TimeRange
from external_query_service.verifier._notes import ReaderNote
from external_query_service.verifier._timecheck import TimeVerdict, check_time, local_date
from tests.support.world import CST

TODAY = date(2024, 5, 11)


def evidence(**changes: Any) -> Evidence:
    fields: dict[str, Any] = {
        "evidence_id": "ev-1",
        "adapter_id": "searx",
        "provider_type": "live_search",
        "basis": "page_body",
        "url": "https://news-a.test/a",
        "site": "news-a.test",
        "snippet": "湛江明天多云",
        "score": 8000,
        "accessed_at": datetime(2024, 5, 11, 2, 0, tzinfo=UTC),
        "content_digest": "sha256:" + "0" * 64,
        "raw_digest": "sha256:" + "1" * 64,
    }
    fields.update(changes)
    return Evidence(**fields)


def plan(**changes: Any) -> ExternalQueryPlan:
    return ExternalQueryPlan(question="湛江明天天气", search_queries=("湛江 天气",), **changes)


def on(start: date, end: date | None = None) -> ExternalQueryPlan:
    return plan(time_range=TimeRange(start=start, end=end or start))


def judge(item: Evidence, the_plan: ExternalQueryPlan, *, max_age_days: int = 3) -> TimeVerdict:
    return check_time(item, the_plan, today=TODAY, max_age_days=max_age_days)


def test_forecast_published_the_day_before_about_the_target_day_passes() -> None:
    item = evidence(published_at=date(2024, 5, 11), about_dates=(date(2024, 5, 12),))
    verdict = judge(item, on(date(2024, 5, 12)))
    assert (verdict.passed, verdict.reason) == (True, "ok")


def test_page_published_inside_the_range_passes_without_about_dates() -> None:
    verdict = judge(evidence(published_at=date(2024, 5, 3)), on(date(2024, 5, 1), date(2024, 5, 7)))
    assert verdict.passed


def test_page_about_and_published_outside_the_range_fails() -> None:
    item = evidence(published_at=date(2024, 4, 1), about_dates=(date(2024, 4, 2),))
    verdict = judge(item, on(date(2024, 5, 12)))
    assert (verdict.passed, verdict.reason) == (False, "out_of_time_range")
    assert "2024-04-02" in verdict.detail


def test_undated_evidence_cannot_satisfy_a_time_range() -> None:
    verdict = judge(evidence(), on(date(2024, 5, 12)))
    assert (verdict.passed, verdict.reason) == (False, "undated")


def test_fact_api_weekend_rate_carried_forward_from_friday_passes_with_a_note() -> None:
    rate = evidence(provider_type="fact_api", basis="fact_api", about_dates=(date(2024, 5, 10),))
    verdict = judge(rate, on(date(2024, 5, 12)), max_age_days=3)
    assert (verdict.passed, verdict.reason) == (True, "carried_forward")
    assert verdict.note == ReaderNote("carried_forward", date(2024, 5, 10))


def test_fact_api_date_older_than_max_age_is_not_carried_forward() -> None:
    rate = evidence(provider_type="fact_api", basis="fact_api", about_dates=(date(2024, 5, 1),))
    verdict = judge(rate, on(date(2024, 5, 12)), max_age_days=3)
    assert (verdict.passed, verdict.reason) == (False, "out_of_time_range")


def test_search_page_about_an_earlier_date_is_not_carried_forward() -> None:
    page = evidence(about_dates=(date(2024, 5, 10),))
    assert judge(page, on(date(2024, 5, 12)), max_age_days=3).reason == "out_of_time_range"


def test_freshness_rejects_a_page_older_than_max_age() -> None:
    verdict = judge(evidence(published_at=date(2024, 5, 1)), plan(freshness_required=True))
    assert (verdict.passed, verdict.reason) == (False, "stale")


def test_freshness_uses_the_latest_about_date_when_there_is_no_publication_date() -> None:
    item = evidence(about_dates=(date(2024, 4, 1), date(2024, 5, 10)))
    assert judge(item, plan(freshness_required=True)).passed


def test_freshness_lets_undated_evidence_through_with_an_uncertainty() -> None:
    verdict = judge(evidence(), plan(freshness_required=True))
    assert verdict.passed
    assert verdict.note == ReaderNote("undated")


def test_without_range_or_freshness_an_old_page_passes() -> None:
    verdict = judge(evidence(published_at=date(2001, 1, 1)), plan())
    assert (verdict.passed, verdict.reason) == (True, "no_time_constraint")


def test_today_is_the_local_date_at_the_offset_now_carries() -> None:
    moment = datetime(2024, 5, 11, 20, 0, tzinfo=UTC)
    assert local_date(moment) == date(2024, 5, 11)
    assert local_date(moment.astimezone(CST)) == date(2024, 5, 12)


def test_freshness_boundary_moves_with_the_offset_of_now() -> None:
    item = evidence(published_at=date(2024, 5, 1))
    moment = datetime(2024, 5, 11, 20, 0, tzinfo=UTC)
    fresh = plan(freshness_required=True)
    in_utc = check_time(item, fresh, today=local_date(moment), max_age_days=10)
    in_cst = check_time(item, fresh, today=local_date(moment.astimezone(CST)), max_age_days=10)
    assert (in_utc.passed, in_cst.reason) == (True, "stale")


def test_naive_now_is_refused() -> None:
    with pytest.raises(InputError):
        local_date(datetime(2024, 5, 11, 12, 0))  # naive on purpose
