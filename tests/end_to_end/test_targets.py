"""Evidence must be about the plan's own targets: both currencies of a rate, and each compare
target the evidence was gathered for — through the whole chain on a loopback world."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.models import CheckResult, ExternalAnswer
from external_query_service.testing import FX, World, article, hit

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=timezone(timedelta(hours=8)))
RATE_QUESTION = "美元兑人民币汇率是多少"
RATE = {"query_kind": "exchange_rate", "entities": ["USD", "CNY"]}


def service(world: World, *adapters: dict[str, Any]) -> ExternalQueryService:
    return ExternalQueryService(world.settings(*adapters), clock=fixed_clock(NOW))


def target_checks(answer: ExternalAnswer) -> list[CheckResult]:
    return [check for check in answer.verifier.checks if check.check == "target"]


def rate_page(world: World, title: str, paragraph: str) -> None:
    """The rate API is down; search finds one page with ``title`` and ``paragraph``."""
    world.fault(f"{world.base(FX)}/currencies", "http_500")
    world.fault(f"{world.base(FX)}/latest", "http_500")
    url = world.page("fx-forum.test", "/rate", article(title, [paragraph], published="2026-11-30"))
    world.results(RATE_QUESTION, [hit(url, title, paragraph, "2026-11-30")])


def ask_rate(world: World) -> ExternalAnswer:
    with service(world, world.frankfurter(), world.searxng()) as svc:
        return svc.answer(RATE_QUESTION, RATE)


@pytest.mark.parametrize(
    ("title", "paragraph", "named"),
    [
        (
            # A community answer to a loosely worded question, about another pair.
            "港币对人民币汇率",
            "网友提问：今天汇率是多少？热心网友回答：11月30日港币对人民币汇率是0.8848，"
            "即1港币可兑换0.8848元人民币。",
            "names CNY (人民币) but not USD",
        ),
        (
            # The same pair by its codes: CNY alone once let such a page answer.
            "港币对人民币汇率",
            "网友提问：今天人民币汇率是多少？热心网友回答：HKD/CNY 0.8848，较前一交易日上涨。",
            "names CNY but not USD",
        ),
    ],
    ids=["names", "codes"],
)
def test_a_hong_kong_dollar_page_does_not_answer_a_us_dollar_question(
    world: World, title: str, paragraph: str, named: str
) -> None:
    rate_page(world, title, paragraph)
    answer = ask_rate(world)

    assert answer.status == "insufficient_evidence"
    assert answer.verifier.rejected  # the page was read, then judged
    assert {d.reason for d in answer.verifier.rejected} == {"target_mismatch"}
    assert answer.verifier.accepted == ()
    assert {c.detail for c in target_checks(answer)} == {named}
    assert "0.8848" not in answer.text
    assert [a.status for a in answer.attempts] == ["failed", "ok"]


@pytest.mark.parametrize(
    ("title", "paragraph", "named"),
    [
        (
            "美元兑人民币汇率今日行情",
            "11月30日美元兑人民币汇率为7.1，即1美元可兑换7.1元人民币，较前一交易日持平。",
            "names USD (美元), CNY (人民币)",
        ),
        (
            "今日汇率行情",
            "11月30日人民币汇率中间价：USD/CNY 7.1，较前一交易日持平。",
            "names USD, CNY",
        ),
        (
            # Traditional script shares only 美元, 人民 and 是 with the question's terms; the
            # answer names them too, so the page does not rest on the words of its question.
            "美元兌人民幣匯率",
            "網友提問：美元兌人民幣匯率是多少？熱心網友回答：11月30日美元兌人民幣匯率是7.1，"
            "即1美元可兌換7.1元人民幣。",
            "names USD (美元), CNY (人民币)",
        ),
    ],
    ids=["simplified-names", "codes", "traditional-names"],
)
def test_a_page_naming_both_currencies_answers(
    world: World, title: str, paragraph: str, named: str
) -> None:
    rate_page(world, title, paragraph)
    answer = ask_rate(world)

    assert answer.status == "answered"
    assert "7.1" in answer.text
    assert answer.verifier.rejected == ()
    assert {c.detail for c in target_checks(answer)} == {named}


def sales_page(world: World, site: str, title: str, paragraph: str) -> str:
    return world.page(site, "/sales", article(title, [paragraph], published="2026-11-29"))


def test_a_page_from_one_targets_search_covers_only_that_target(world: World) -> None:
    question = "比亚迪和特斯拉11月销量对比"
    byd = sales_page(
        world,
        "auto-a.test",
        "比亚迪11月销量公布",
        "比亚迪公布11月新能源汽车销量为50.6万辆，同比增长百分之十二，海外销量创新高。",
    )
    # The search for the other target returns a second page that again names only 比亚迪.
    off_target = sales_page(
        world,
        "auto-b.test",
        "比亚迪海外销量",
        "比亚迪11月海外销量约为13.1万辆，同比翻番，欧洲和东南亚市场增长最快。",
    )
    world.results("比亚迪 11月销量", [hit(byd, "比亚迪销量", "比亚迪11月销量")])
    world.results("特斯拉 11月销量", [hit(off_target, "11月销量", "11月销量")])
    with service(world, world.searxng()) as svc:
        answer = svc.answer(
            question,
            {
                "compare_targets": ["比亚迪", "特斯拉"],
                "search_queries": ["比亚迪 11月销量", "特斯拉 11月销量"],
            },
        )

    result = answer.verifier
    assert (answer.status, answer.reason) == ("insufficient_evidence", "insufficient_sources")
    assert result.missing_targets == ("特斯拉",)
    # Every evidence, admitted or not, has an origin check naming its host.
    site_of = {c.evidence_id: c.detail for c in result.checks if c.check == "origin"}
    assert {site_of[d.evidence_id] for d in result.accepted} == {"auto-a.test"}
    assert {site_of[d.evidence_id] for d in result.rejected} == {"auto-b.test"}
    coverage = {c.detail.split(":")[0]: c.passed for c in result.checks if c.check == "coverage"}
    assert coverage == {"比亚迪": True, "特斯拉": False}
    off = [c for c in target_checks(answer) if not c.passed]
    assert off
    assert all(c.detail.startswith("gathered for 特斯拉 but none of 特斯拉") for c in off)
    assert {d.reason for d in result.rejected} == {"target_mismatch"}
