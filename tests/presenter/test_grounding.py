"""Every sentence of a model-written answer is grounded in the evidence it cites, for every
answer contract: a scripted loopback model writes, the check decides (per sentence), and a
refused reply falls back to the extractive answer naming the check and the sentence."""

from __future__ import annotations

import asyncio
import re
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from external_query_service import ExternalQueryService, Settings
from external_query_service.adapters._base import evidence_id
from external_query_service.llm import ChatCompletionsClient
from external_query_service.models import AnswerContract, Evidence, ExternalContextPacket
from external_query_service.presenter import ModelPresenter
from external_query_service.presenter._extractive import ExtractivePresenter, Presentation
from external_query_service.presenter._grounding import split_sentences
from external_query_service.testing import Reply
from external_query_service.text._quantities import find_quantities
from tests.support.llm_chat import ChatServer, answer_json
from tests.support.packets import make_evidence, make_packet
from tests.support.world import docs_folder

PORT_ID = evidence_id("https://port-news.example.com/throughput", "sha256:p1", 0)
RATE_ID = evidence_id("https://stats.example.org/share", "sha256:p2", 0)


def port_news() -> Evidence:
    return make_evidence(
        1,
        evidence_id=PORT_ID,
        site="port-news.example.com",
        url="https://port-news.example.com/throughput",
        title="湛江港吞吐量创新高",
        snippet="湛江港今年货物吞吐量达2.6亿吨，同比增长百分之二十六。港口集团表示，"
        "新航道将在明天投入使用。“集装箱航线持续加密”，集团负责人说。",
        published_at=date(2026, 11, 30),
    )


def share_page() -> Evidence:
    return make_evidence(
        2,
        evidence_id=RATE_ID,
        site="stats.example.org",
        url="https://stats.example.org/share",
        title="Port share",
        snippet="On 2026-11-28 the share of rail freight reached 26%. Highs near 24 °F.",
        published_at=date(2026, 11, 28),
    )


def packet(contract: AnswerContract = "summary_with_sources") -> ExternalContextPacket:
    # A comparison sets the port against rail freight, one page each.
    targets = ("湛江港", "rail freight") if contract == "compare_with_sources" else ()
    return make_packet((port_news(), share_page()), contract=contract, compare_targets=targets)


def present(chat: ChatServer, text: str, contract: AnswerContract) -> Presentation:
    chat.then(answer_json({"text": text, "citations": [PORT_ID]}))
    presenter = ModelPresenter(ChatCompletionsClient(chat.settings()))
    return asyncio.run(presenter.present(packet(contract)))


CONTRACTS: tuple[AnswerContract, ...] = (
    "direct_fact",
    "summary_with_sources",
    "compare_with_sources",
)


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize(
    ("text", "check", "detail"),
    [
        ("It is 99999 units [1].", "invented_number", "99999 does not occur"),
        ("湛江港今年货物吞吐量达3亿吨 [1]。", "invented_number", "300000000 t does not"),
        ("湛江港今年货物吞吐量达2.6亿吨。", "uncited_statement", "without a citation"),
        ("吞吐量达2.6亿吨 [1]。新航道后天投入使用。", "uncited_statement", "without a"),
        ("2026年12月5日，新航道投入使用 [1]。", "wrong_date", "2026-12-05 is not"),
        ("新航道将在后天投入使用 [1]。", "wrong_date", "后天 is not"),
        # The page's "明天" was 2026-12-01; read on 2026-12-01, "明天" is another day.
        ("新航道明天投入使用 [1]。", "wrong_date", "明天 is not"),
        ("集团负责人说：「集装箱航线大幅缩减」[1]。", "unquoted_span", "is not in the cited"),
        ("The share of rail freight reached 26% [2]. Highs near 24 °C [2].", "unit_mismatch", ""),
    ],
)
def test_a_claim_the_cited_evidence_does_not_hold_falls_back_naming_the_check(
    chat: ChatServer, contract: AnswerContract, text: str, check: str, detail: str
) -> None:
    shown = present(chat, text, contract)

    expected = ExtractivePresenter().present(packet(contract))
    assert shown.renderer == "extractive"
    assert shown.text == expected.text
    assert shown.fallback_reason is not None
    assert shown.fallback_reason.startswith(f"{check}: ")
    assert detail in shown.fallback_reason
    failed = next(s for s in shown.sentences if s.verdict == check)
    assert f"「{failed.sentence}」" in shown.fallback_reason  # the sentence is quoted


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize(
    "text",
    [
        "湛江港今年货物吞吐量达 2.6 亿吨，同比增长26% [1]。",
        "Throughput reached 260,000,000 t, up 百分之二十六 [1].",
        "湛江港吞吐量２．６亿吨 [1]。新航道将于2026年12月1日投入使用 [1]。",
        # Read on 2026-12-01, the page's "明天" (published 2026-11-30) is today.
        "新航道今天投入使用 [1]。集团负责人说：“集装箱航线持续加密”[1]。",
        "## 吞吐量\n要点：\n- 湛江港今年货物吞吐量达2.6亿吨 [1]。\n- 铁路运输占比26% [2]。",
        f"湛江港今年货物吞吐量达2.6亿吨。[{PORT_ID}]",
    ],
)
def test_a_faithful_answer_passes_however_its_numbers_are_written(
    chat: ChatServer, contract: AnswerContract, text: str
) -> None:
    shown = present(chat, text, contract)

    assert shown.fallback_reason is None
    assert shown.renderer == "llm"
    assert {s.verdict for s in shown.sentences} <= {"grounded", "not_a_statement"}
    assert any(s.verdict == "grounded" for s in shown.sentences)


def works_page(text: str) -> Evidence:
    return make_evidence(
        3,
        site="works.example.com",
        url="https://works.example.com/bridge",
        title="跨海大桥工程进展",
        snippet=text,
        published_at=date(2026, 3, 10),
    )


@pytest.mark.parametrize(
    ("evidence_text", "answer", "verdict"),
    [
        # Read from the page's publication date (2026), 明年六月 is June 2027.
        ("大桥主体工程预计2027年6月底完工。", "大桥预计明年六月底完工 [1]。", "grounded"),
        ("大桥主体工程预计明年6月底完工。", "大桥预计明年六月底完工 [1]。", "grounded"),
        ("The bridge should be finished in June 2027.", "It opens June next year [1].", "grounded"),
        ("大桥主体工程预计今年6月底完工。", "大桥预计明年六月底完工 [1]。", "wrong_date"),
        ("大桥主体工程预计2027年9月完工。", "大桥预计明年六月底完工 [1]。", "wrong_date"),
        ("大桥主体工程进展顺利。", "大桥预计明年完工 [1]。", "wrong_date"),
    ],
)
def test_a_relative_year_is_read_from_the_cited_pages_publication_date(
    chat: ChatServer, evidence_text: str, answer: str, verdict: str
) -> None:
    page = works_page(evidence_text)
    chat.then(answer_json({"text": answer, "citations": [page.evidence_id]}))
    presenter = ModelPresenter(ChatCompletionsClient(chat.settings()))
    bundle = make_packet((page,), question="跨海大桥什么时候完工？")

    shown = asyncio.run(presenter.present(bundle))

    assert shown.sentences[0].verdict == verdict
    if verdict == "wrong_date":
        # An unsupported relative date falls back to the extractive answer.
        assert shown.renderer == "extractive"
        assert shown.text == ExtractivePresenter().present(bundle).text
        assert shown.fallback_reason is not None
        assert shown.fallback_reason.startswith("wrong_date: ")
    else:
        assert shown.renderer == "llm"


def test_every_sentence_has_its_verdict_even_when_one_fails(chat: ChatServer) -> None:
    text = "## 概况\n吞吐量达2.6亿吨 [1]。增长了百分之九十 [1]。航道今天启用 [1]。"

    shown = present(chat, text, "summary_with_sources")

    assert [(s.sentence, s.verdict) for s in shown.sentences] == [
        ("## 概况", "not_a_statement"),
        ("吞吐量达2.6亿吨 [1]。", "grounded"),
        ("增长了百分之九十 [1]。", "invented_number"),
        ("航道今天启用 [1]。", "grounded"),
    ]
    assert shown.sentences[1].citations == (PORT_ID,)


def test_a_number_must_be_in_the_evidence_its_own_sentence_cites(chat: ChatServer) -> None:
    # 26% is in both; 24 only in the stats page, which the second sentence does not cite.
    shown = present(chat, "铁路运输占比26% [2]。最高约24 °F [1]。", "summary_with_sources")

    assert shown.fallback_reason is not None
    assert shown.fallback_reason.startswith("invented_number: 24 °F does not occur")


def test_a_source_number_outside_the_list_is_an_unknown_citation(chat: ChatServer) -> None:
    shown = present(chat, "吞吐量达2.6亿吨 [7]。", "summary_with_sources")

    assert shown.fallback_reason == "unknown_citation: [7] is not a source of this answer"


# --- the parts, directly ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("2.6亿吨", [("260000000", "t")]),
        ("260000000 t", [("260000000", "t")]),
        ("26%", [("26", "%")]),
        ("百分之二十六", [("26", "%")]),
        ("百分之八", [("8", "%")]),
        ("２６", [("26", "")]),
        ("1,200", [("1200", "")]),
        ("二十六度", [("26", "°C")]),
        ("两千", [("2000", "")]),
        ("三点五", [("3.5", "")]),
        ("-3 °C", [("-3", "°C")]),
        ("零下3度", [("-3", "°C")]),
        ("18-24 °C", [("18", "°C"), ("24", "°C")]),
        ("18至24℃", [("18", "°C"), ("24", "°C")]),
        ("24 °F", [("24", "°F")]),
        ("东北风3级", [("3", "")]),
        ("3 million", [("3000000", "")]),
        ("统一一些", []),  # single numerals inside words are not numbers
    ],
)
def test_quantities_are_read_as_values_with_canonical_units(
    text: str, values: list[tuple[str, str]]
) -> None:
    found = [(quantity.value, quantity.unit) for quantity in find_quantities(text)]
    assert found == [(Decimal(value), unit) for value, unit in values]


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("多云。最高24 °C。", ("多云。", "最高24 °C。")),
        ("Cloudy [1]. High 24.1 °C [1].", ("Cloudy [1].", "High 24.1 °C [1].")),
        ("多云。[ev-0a1b2c] 转晴！", ("多云。[ev-0a1b2c]", "转晴！")),
        ("他说：“今天多云。明天转晴。”[1]", ("他说：“今天多云。明天转晴。”[1]",)),
        ("标题：\n- 第一点", ("标题：", "- 第一点")),
    ],
)
def test_sentences_split_on_end_punctuation_and_lines_never_inside_quotes(
    text: str, sentences: tuple[str, ...]
) -> None:
    assert split_sentences(text) == sentences


# --- through the service: the audit holds every sentence's verdict ---------------------------


def test_the_render_event_records_each_sentences_verdict(chat: ChatServer, tmp_path: Path) -> None:
    page = "# Verifier\n\nThe verifier needs 2 independent sources for a summary answer.\n"
    settings = Settings().with_docs(docs_folder(tmp_path, {"verifier.md": page}))
    settings = settings.model_copy(update={"llm": chat.settings()})

    def writes(body: dict[str, Any]) -> Reply:
        prompt = "\n".join(message["content"] for message in body["messages"])
        cited = re.findall(r"ev-[0-9a-f]{12}", prompt)[:1]
        text = "Verifier:\nIt needs 2 independent sources [1]. It needs 3 for a compare [1]."
        return answer_json({"text": text, "citations": cited})

    chat.then(writes, writes)
    with ExternalQueryService(settings) as service:
        answer = service.answer("What does the verifier need?", {"query_kind": "documentation"})

    render = answer.audit.named("render")[-1].detail
    assert answer.status == "answered"
    assert render["renderer"] == "extractive"
    assert render["fallback_reason"].startswith("invented_number: 3 does not occur")
    assert [(s["sentence"], s["verdict"]) for s in render["sentences"]] == [
        ("Verifier:", "not_a_statement"),
        ("It needs 2 independent sources [1].", "grounded"),
        ("It needs 3 for a compare [1].", "invented_number"),
    ]
