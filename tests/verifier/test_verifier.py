from __future__ import annotations

from datetime import date, datetime

import pytest

import external_query_service.verifier as verifier_package
from external_query_service.errors import InputError
from external_query_service.models import (
    AdapterAttempt,
    Finding,
    PlaceCandidate,
)
from external_query_service.settings import Settings
from external_query_service.verifier import Verifier
from tests.support.verifying import attempt, evidence, gathered, plan, verify

# -- factories --------------------------------------------------------------------------------


def place(name: str, admin1: str, country_code: str = "CN") -> PlaceCandidate:
    return PlaceCandidate(
        name=name, admin1=admin1, country_code=country_code, latitude="21.27", longitude="110.36"
    )


# -- outcome per reason code ------------------------------------------------------------------


def test_matching_dated_evidence_is_answered() -> None:
    outcome = verify(gathered(items=[evidence()]))
    assert (outcome.result.status, outcome.result.reason) == ("answered", None)
    assert [e.evidence_id for e in outcome.admitted] == ["ev-1"]


def test_weather_without_location_asks_for_the_missing_slot() -> None:
    finding = Finding(adapter_id="meteo", kind="missing_slot", slot="location")
    outcome = verify(gathered(plan(location=None), findings=[finding]))
    result = outcome.result
    assert (result.status, result.reason, result.missing_slots) == (
        "clarify",
        "missing_slot",
        ("location",),
    )


def test_same_name_in_two_provinces_asks_which_even_with_evidence_for_one() -> None:
    candidates = (place("朝阳区", "北京市"), place("朝阳市", "辽宁省"), place("朝阳区", "北京市"))
    finding = Finding(
        adapter_id="meteo", kind="place_candidates", slot="location", candidates=candidates
    )
    page = evidence(title="朝阳天气", snippet="朝阳明天晴")
    outcome = verify(gathered(plan(location="朝阳"), [page], findings=[finding]))
    assert (outcome.result.status, outcome.result.reason) == ("clarify", "ambiguous_target")
    assert outcome.result.clarify_options == ("朝阳区，北京市", "朝阳市，辽宁省")


def test_no_ranked_adapter_is_no_ready_provider() -> None:
    skipped = attempt(status="skipped")
    outcome = verify(gathered(attempts=[skipped], ranks=(None, None)))
    assert (outcome.result.status, outcome.result.reason) == (
        "insufficient_evidence",
        "no_ready_provider",
    )


def test_nothing_ranked_is_no_ready_provider_whatever_the_attempts_say() -> None:
    outcome = verify(gathered(attempts=[attempt(status="empty")], ranks=(None,)))
    assert outcome.result.reason == "no_ready_provider"


def test_only_skipped_attempts_is_no_ready_provider_even_when_ranked() -> None:
    outcome = verify(gathered(attempts=[attempt(status="skipped")], ranks=(1,)))
    assert outcome.result.reason == "no_ready_provider"


def test_every_tried_provider_failing_is_retryable_all_providers_failed() -> None:
    attempts = [attempt("a", "failed"), attempt("b", "timeout"), attempt("c", "skipped")]
    outcome = verify(gathered(attempts=attempts, ranks=(1, 2, None)))
    assert outcome.result.reason == "all_providers_failed"
    assert outcome.result.retryable


def test_empty_results_are_no_matching_evidence() -> None:
    attempts = [attempt("a", "failed"), attempt("b", "empty")]
    outcome = verify(gathered(attempts=attempts, ranks=(1, 2)))
    assert outcome.result.reason == "no_matching_evidence"
    assert not outcome.result.retryable


def test_evidence_only_from_denied_sites_is_filtered_out() -> None:
    items = [evidence(1, url="https://www.spam.test/a"), evidence(2, url="https://spam.test/b")]
    outcome = verify(gathered(items=items), sources={"deny_domains": ["spam.test"]})
    assert outcome.result.reason == "filtered_out"
    assert {d.reason for d in outcome.result.rejected} == {"denied_domain"}


def test_evidence_about_other_days_is_out_of_time_range() -> None:
    old = evidence(1, published_at=date(2024, 4, 1), about_dates=(date(2024, 4, 2),))
    undated = evidence(2, published_at=None, about_dates=())
    denied = evidence(3, url="https://spam.test/a")
    outcome = verify(
        gathered(items=[old, undated, denied]), sources={"deny_domains": ["spam.test"]}
    )
    assert (outcome.result.status, outcome.result.reason) == (
        "insufficient_evidence",
        "out_of_time_range",
    )


def test_evidence_all_about_another_place_is_target_mismatch() -> None:
    other = evidence(title="江门天气预报", snippet="江门市明天小雨")
    outcome = verify(gathered(items=[other]))
    assert (outcome.result.reason, outcome.result.retryable) == ("target_mismatch", False)
    assert outcome.result.rejected[0].reason == "target_mismatch"


def test_another_place_mixed_with_a_filtered_source_is_no_matching_evidence() -> None:
    other = evidence(1, title="江门天气预报", snippet="江门市明天小雨")
    private = evidence(2, url="http://10.0.0.5/weather")
    outcome = verify(gathered(items=[other, private]))
    assert outcome.result.reason == "no_matching_evidence"


@pytest.mark.parametrize(
    ("failures", "reason", "retryable"),
    [
        (["network", "network"], "network_unavailable", True),
        (["misconfigured", "network"], "provider_misconfigured", False),
        (["misconfigured"], "provider_misconfigured", False),
        (["misconfigured", "transient"], "all_providers_failed", True),
        (["transient", "network"], "all_providers_failed", True),
        ([None], "all_providers_failed", True),
    ],
)
def test_when_every_provider_failed_the_reason_says_whether_retrying_helps(
    failures: list[str | None], reason: str, retryable: bool
) -> None:
    attempts = [
        AdapterAttempt(
            adapter_id=f"a{i}",
            provider_type="live_search",
            status="failed",
            reason="x",
            rank=1,
            failure=failure,  # type: ignore[arg-type]
        )
        for i, failure in enumerate(failures)
    ]
    outcome = verify(gathered(items=[], attempts=attempts, ranks=[1] * len(failures)))
    assert (outcome.result.reason, outcome.result.retryable) == (reason, retryable)


def test_two_pages_on_one_site_do_not_make_two_sources() -> None:
    items = [evidence(1, url="https://a.news.test/1"), evidence(2, url="https://b.news.test/2")]
    outcome = verify(gathered(items=items), verifier={"min_sources_direct_fact": 2})
    assert (outcome.result.status, outcome.result.reason) == (
        "insufficient_evidence",
        "insufficient_sources",
    )
    assert len(outcome.admitted) == 2


def test_compare_names_the_target_no_site_covers() -> None:
    compare = plan(
        query_kind="generic_web",
        answer_contract="compare_with_sources",
        location=None,
        time_range=None,
        compare_targets=("湛江", "茂名"),
    )
    items = [evidence(1), evidence(2, title="湛江与阳江", snippet="湛江港吞吐量")]
    outcome = verify(gathered(compare, items))
    result = outcome.result
    assert (result.reason, result.missing_targets) == ("insufficient_sources", ("茂名",))
    coverage = {c.detail.split(":")[0]: c.passed for c in result.checks if c.check == "coverage"}
    assert coverage == {"湛江": True, "茂名": False}


def test_compare_with_every_target_covered_is_answered() -> None:
    compare = plan(
        answer_contract="compare_with_sources",
        location=None,
        time_range=None,
        compare_targets=("湛江", "茂名"),
    )
    items = [evidence(1), evidence(2, title="茂名天气", snippet="茂名市明天晴")]
    assert verify(gathered(compare, items)).result.status == "answered"


# -- per-source checks ------------------------------------------------------------------------


def test_every_evidence_gets_one_origin_target_and_time_check() -> None:
    outcome = verify(gathered(items=[evidence(1), evidence(2)]))
    per_source = [(c.evidence_id, c.check) for c in outcome.result.checks if c.evidence_id]
    assert per_source == [
        ("ev-1", "origin"),
        ("ev-1", "target"),
        ("ev-1", "time"),
        ("ev-2", "origin"),
        ("ev-2", "target"),
        ("ev-2", "time"),
    ]


def test_rejection_names_the_first_failing_check() -> None:
    # Wrong place and wrong day: the target check comes first.
    item = evidence(title="江门天气", snippet="江门小雨", about_dates=(date(2024, 1, 1),))
    outcome = verify(gathered(items=[item]))
    assert [(d.evidence_id, d.decision, d.reason) for d in outcome.result.rejected] == [
        ("ev-1", "reject", "target_mismatch")
    ]


def test_admitted_evidence_keeps_input_order() -> None:
    items = [evidence(3), evidence(1, title="江门", snippet="江门"), evidence(2)]
    outcome = verify(gathered(items=items))
    assert [e.evidence_id for e in outcome.admitted] == ["ev-3", "ev-2"]
    assert [d.evidence_id for d in outcome.result.accepted] == ["ev-3", "ev-2"]


def test_gathered_for_is_not_proof_of_the_target() -> None:
    item = evidence(title="天气预报", snippet="明天多云", gathered_for="湛江")
    assert verify(gathered(items=[item])).result.rejected[0].reason == "target_mismatch"


def test_geocoder_alias_proves_the_target() -> None:
    item = evidence(
        provider_type="fact_api",
        basis="fact_api",
        title="Weather forecast",
        snippet="多云，26–31 °C",
        aliases=("湛江",),
    )
    assert verify(gathered(plan(location="湛江市"), [item])).result.status == "answered"


def test_plan_location_and_an_entity_must_both_match() -> None:
    item = evidence(title="湛江天气", snippet="湛江明天多云")
    outcome = verify(gathered(plan(entities=("台风",)), [item]))
    assert outcome.result.rejected[0].reason == "target_mismatch"


def test_fact_api_endpoint_skips_the_deny_list() -> None:
    item = evidence(provider_type="fact_api", basis="fact_api", url="http://127.0.0.1:9000/v1")
    outcome = verify(gathered(items=[item]), sources={"deny_domains": ["127.0.0.1"]})
    assert outcome.result.status == "answered"


def test_search_result_on_a_private_address_is_refused() -> None:
    item = evidence(url="http://169.254.169.254/latest")
    assert verify(gathered(items=[item])).result.rejected[0].reason == "private_address"


# -- candidates, uncertainties, contract -------------------------------------------------------


def test_one_plausible_place_group_does_not_ask() -> None:
    candidates = (
        place("湛江市", "广东省"),
        place("湛江", "广东省"),
        place("Zhanjiang Bay", "Other", "XX"),
    )
    finding = Finding(
        adapter_id="meteo", kind="place_candidates", slot="location", candidates=candidates
    )
    outcome = verify(gathered(items=[evidence()], findings=[finding]))
    assert outcome.result.status == "answered"
    assert [c.reason for c in outcome.result.checks if c.check == "candidates"] == ["ok"]


def test_carried_forward_rate_is_admitted_with_an_uncertainty() -> None:
    rates = plan(
        question="今天美元兑人民币汇率",
        query_kind="exchange_rate",
        location=None,
        entities=("USD", "CNY"),
    )
    rate = evidence(
        provider_type="fact_api",
        basis="fact_api",
        url="https://api.frankfurter.test/v1/latest",
        title="USD → CNY",
        snippet="1 USD = 7.2345 CNY",
        published_at=None,
        about_dates=(date(2024, 5, 10),),
    )
    outcome = verify(gathered(rates, [rate]), verifier={"max_age_days": 3})
    assert outcome.result.status == "answered"
    assert any("2024-05-10" in note for note in outcome.uncertainties)


def test_snippet_only_evidence_is_flagged_for_the_reader() -> None:
    outcome = verify(gathered(items=[evidence(basis="search_snippet")]))
    assert outcome.uncertainties == ("部分来源未能读取正文，仅依据搜索摘要",)


def test_uncertainties_of_rejected_evidence_are_not_reported() -> None:
    fresh = plan(time_range=None, freshness_required=True)
    undated_elsewhere = evidence(1, title="江门", snippet="江门", published_at=None, about_dates=())
    outcome = verify(gathered(fresh, [undated_elsewhere, evidence(2)]))
    assert outcome.uncertainties == ()


def test_now_without_an_offset_is_refused() -> None:
    with pytest.raises(InputError):
        Verifier(Settings()).verify(gathered(), now=datetime(2024, 5, 11))


def test_public_names_are_pinned_and_importable() -> None:
    # isort-style order (constants, classes, functions), as ruff's RUF022 keeps it.
    # Site and target helpers moved to net/_sites.py and text/_targets.py, shared with the gateway.
    assert verifier_package.__all__ == [
        "TimeVerdict",
        "Verifier",
        "VerifierOutcome",
        "check_time",
        "local_date",
    ]
    assert all(hasattr(verifier_package, name) for name in verifier_package.__all__)


def test_a_village_sharing_a_city_name_is_not_an_ambiguity() -> None:
    candidates = (
        place("湛江市", "广东省").model_copy(update={"population": 7_000_000}),
        place("湛江", "湖南省").model_copy(update={"population": 800}),
    )
    finding = Finding(
        adapter_id="meteo", kind="place_candidates", slot="location", candidates=candidates
    )
    outcome = verify(gathered(items=[evidence()], findings=[finding]))
    assert outcome.result.status == "answered"


def test_two_cities_sharing_a_name_ask_which_one() -> None:
    candidates = (
        place("湛江市", "广东省").model_copy(update={"population": 7_000_000}),
        place("湛江市", "湖南省").model_copy(update={"population": 900_000}),
    )
    finding = Finding(
        adapter_id="meteo", kind="place_candidates", slot="location", candidates=candidates
    )
    outcome = verify(gathered(items=[evidence()], findings=[finding]))
    assert outcome.result.status == "clarify"
    assert len(outcome.result.clarify_options) == 2
