"""The target check: both currencies of a rate, and each compare target where it was sought."""

from __future__ import annotations

import pytest

from external_query_service.models import CheckResult, ExternalQueryPlan
from external_query_service.verifier import VerifierOutcome
from tests.support.verifying import evidence, gathered, plan, verify


def rate_plan() -> ExternalQueryPlan:
    return plan(
        question="美元兑人民币汇率是多少",
        query_kind="exchange_rate",
        answer_contract="direct_fact",
        search_queries=("美元兑人民币汇率是多少",),
        location=None,
        time_range=None,
        entities=("USD", "CNY"),
    )


def compare_plan() -> ExternalQueryPlan:
    return plan(
        question="比亚迪和特斯拉11月销量对比",
        query_kind="generic_web",
        answer_contract="compare_with_sources",
        search_queries=("比亚迪 11月销量", "特斯拉 11月销量"),
        location=None,
        time_range=None,
        compare_targets=("比亚迪", "特斯拉"),
    )


def target(outcome: VerifierOutcome, evidence_id: str = "ev-1") -> CheckResult:
    return next(
        c for c in outcome.result.checks if c.check == "target" and c.evidence_id == evidence_id
    )


# -- exchange rates ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "snippet", "detail"),
    [
        ("港币对人民币汇率", "港币对人民币汇率是0.8848", "names CNY (人民币) but not USD"),
        ("今日汇率", "HKD/CNY 0.8848", "names CNY but not USD"),
        ("美元汇率", "1 美元 = 7.1 ¥", "names USD (美元) but not CNY"),
        ("今日汇率", "HKD/JPY 19.8", "names neither USD nor CNY"),
    ],
    ids=["hkd-names", "hkd-codes", "yen-sign-is-ambiguous", "another-pair"],
)
def test_rate_evidence_naming_one_currency_or_none_is_a_target_mismatch(
    title: str, snippet: str, detail: str
) -> None:
    outcome = verify(gathered(rate_plan(), [evidence(title=title, snippet=snippet)]))
    assert outcome.admitted == ()
    assert [d.reason for d in outcome.result.rejected] == ["target_mismatch"]
    assert target(outcome).detail == detail


@pytest.mark.parametrize(
    ("title", "snippet"),
    [
        ("美元兑人民币", "美元兑人民币汇率为7.1"),
        ("今日汇率", "USD/CNY 7.1"),
        ("美元兌人民幣匯率", "美元兌人民幣匯率為7.1"),
        ("汇率", "US$1 = 7.1 人民币"),
        ("Exchange rates", "One US dollar buys 7.1 Chinese yuan"),
    ],
    ids=["simplified", "codes", "traditional", "symbol", "english"],
)
def test_rate_evidence_naming_both_currencies_is_admitted(title: str, snippet: str) -> None:
    outcome = verify(gathered(rate_plan(), [evidence(title=title, snippet=snippet)]))
    assert outcome.result.status == "answered"
    assert target(outcome).detail.startswith("names USD")


def test_a_rate_apis_own_currency_names_count() -> None:
    fact = evidence(
        provider_type="fact_api",
        basis="fact_api",
        title="Frankfurter 欧洲央行参考汇率",
        snippet="2024-05-10 欧洲央行参考汇率：7.2345",
        aliases=("USD", "CNY", "USD/CNY"),
    )
    outcome = verify(gathered(rate_plan(), [fact]))
    assert outcome.result.status == "answered"
    assert target(outcome).detail == "names USD, CNY"


def test_a_rate_page_must_name_the_pair_even_when_searched_for_it() -> None:
    item = evidence(title="港币汇率", snippet="港币对人民币0.8848", gathered_for="美元兑人民币汇率")
    assert verify(gathered(rate_plan(), [item])).result.rejected[0].reason == "target_mismatch"


def test_only_exchange_rate_plans_ask_for_both_codes() -> None:
    news = rate_plan().model_copy(update={"query_kind": "news"})
    outcome = verify(gathered(news, [evidence(title="人民币", snippet="CNY 走强")]))
    assert outcome.result.status == "answered"


# -- compare targets --------------------------------------------------------------------------


def test_evidence_sought_for_one_target_must_name_it() -> None:
    off = evidence(
        title="比亚迪海外销量", snippet="比亚迪11月海外销量13.1万辆", gathered_for="特斯拉 11月销量"
    )
    outcome = verify(gathered(compare_plan(), [off]))
    assert outcome.result.rejected[0].reason == "target_mismatch"
    assert target(outcome).detail == "gathered for 特斯拉 but none of 特斯拉 (best 0)"


def test_evidence_sought_for_one_target_covers_only_that_target() -> None:
    both = evidence(
        title="比亚迪11月销量",
        snippet="比亚迪11月销量50.6万辆，超过特斯拉",
        gathered_for="比亚迪 11月销量",
    )
    outcome = verify(gathered(compare_plan(), [both]))
    result = outcome.result
    assert (result.reason, result.missing_targets) == ("insufficient_sources", ("特斯拉",))
    assert target(outcome).detail == "matched 比亚迪: 100"


def test_evidence_sought_for_every_target_covers_each_it_names() -> None:
    both = evidence(
        title="比亚迪与特斯拉11月销量",
        snippet="比亚迪11月销量50.6万辆，特斯拉中国8.2万辆",
        gathered_for="比亚迪和特斯拉11月销量对比",
    )
    outcome = verify(gathered(compare_plan(), [both]))
    assert outcome.result.status == "answered"
    assert target(outcome).detail == "matched 比亚迪: 100, 特斯拉: 100"


def test_one_page_per_target_covers_both() -> None:
    items = [
        evidence(
            1, title="比亚迪销量", snippet="比亚迪11月销量50.6万辆", gathered_for="比亚迪 11月销量"
        ),
        evidence(
            2,
            title="特斯拉交付",
            snippet="特斯拉中国11月交付8.2万辆",
            gathered_for="特斯拉 11月销量",
        ),
    ]
    result = verify(gathered(compare_plan(), items)).result
    assert (result.status, result.missing_targets) == ("answered", ())
