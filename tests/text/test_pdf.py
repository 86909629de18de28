"""PDFs become evidence: text per page (CJK as written), the page in the evidence URL, caps
on pages, and scanned or encrypted files refused by name."""

from __future__ import annotations

import time

import pytest

from external_query_service.testing import LoopbackServer, World, hit
from external_query_service.text._analyse import (
    PageAnalysis,
    analyse_page,
    analysis_from_json,
    analysis_to_json,
)
from external_query_service.text._pdf import extract_pdf
from tests.support.pdfs import PdfPage, encrypted_pdf, nested_bomb, page_tree_bomb, text_pdf
from tests.support.world import make_service

QUESTION = "湛江港今年货物吞吐量是多少？"
NOTICE = "湛江港集团公告：今年前十个月湛江港货物吞吐量达到2.6亿吨，同比增长百分之八。"
PDF = "application/pdf"


@pytest.fixture
def world(loopback: LoopbackServer) -> World:
    return World(loopback)


def notice_pdf() -> bytes:
    return text_pdf(
        [
            ["Zhanjiang Port Group", "Annual notice"],
            ["目录", "一、经营情况"],
            [NOTICE, "港口方面表示，将继续推进智慧港口建设。"],
        ]
    )


def analyse(body: bytes, query: str = QUESTION) -> PageAnalysis:
    return analyse_page(
        body,
        url="http://port.test/n.pdf",
        declared_charset=None,
        content_type=PDF,
        query=query,
    )


def test_text_is_read_per_page_with_chinese_as_written() -> None:
    read = extract_pdf(notice_pdf(), "http://port.test/n.pdf", max_pages=50, max_chars=10_000)

    assert read.page_count == 3
    assert read.pages[0] == "Zhanjiang Port Group\nAnnual notice"
    assert read.pages[2].split("\n")[0] == NOTICE


def test_a_snippet_knows_its_page_and_survives_the_shared_cache_form() -> None:
    analysis = analyse(notice_pdf())

    assert analysis.snippets
    best = analysis.snippets[0]
    assert NOTICE in best.chunk.text
    assert analysis.page_at(best.chunk.offset) == 3
    assert analysis.page_at(0) == 1
    again = analysis_from_json(analysis_to_json(analysis))
    assert again == analysis


def test_a_pdf_page_with_one_sentence_is_evidence() -> None:
    # 30 characters: far below the HTML floor (40 CJK characters), still a document.
    sentence = "湛江港今年货物吞吐量达到2.6亿吨。"
    analysis = analyse(text_pdf([[sentence]]))

    assert [item.chunk.text for item in analysis.snippets] == [sentence]


def test_a_pdf_with_chinese_text_on_page_3_answers_with_the_page_in_its_source(
    world: World,
) -> None:
    url = world.page("port.test", "/notice.pdf", notice_pdf(), content_type=PDF)
    world.results(QUESTION, [hit(url, "湛江港公告", "湛江港集团公告")])
    with make_service(world, world.searxng()) as service:
        answer = service.answer(QUESTION, {"entities": ["湛江港"]})

    assert answer.status == "answered"
    assert answer.evidence[0].url == f"{url}#page=3"
    assert NOTICE in answer.evidence[0].snippet
    assert answer.sources[0].url == f"{url}#page=3"
    assert f"{url}#page=3" in answer.text


def test_a_scanned_pdf_is_no_text_layer_and_an_encrypted_one_is_encrypted(world: World) -> None:
    scanned = world.page(
        "port.test", "/scan.pdf", text_pdf([PdfPage(picture=True)] * 3), content_type=PDF
    )
    locked = world.page("port.test", "/locked.pdf", encrypted_pdf([NOTICE]), content_type=PDF)
    world.results(QUESTION, [hit(scanned, "扫描件", "湛江港"), hit(locked, "加密件", "湛江港")])
    with make_service(world, world.searxng()) as service:
        answer = service.answer(QUESTION, {"entities": ["湛江港"]})

    assert answer.status != "answered"
    failures = answer.audit.named("attempt")[0].detail["page_failures"]
    assert f"{scanned} not_a_document:no_text_layer" in failures
    assert f"{locked} not_a_document:encrypted" in failures


def test_a_page_tree_claiming_a_million_pages_reads_only_the_capped_pages() -> None:
    bomb = page_tree_bomb(1_000_000)  # a 7 MB file of one page object listed a million times
    started = time.process_time()
    read = extract_pdf(bomb, "http://port.test/bomb.pdf", max_pages=50, max_chars=10_000)

    assert read.page_count == 1_000_000
    assert len(read.pages) == 50
    assert time.process_time() - started < 5.0


def test_deeply_nested_objects_stay_within_the_caps() -> None:
    started = time.process_time()
    # PDFium stops parsing an object past its nesting limit: the junk entry is dropped.
    analysis = analyse(nested_bomb(200_000), query="嵌套页")

    assert analysis.text == "嵌套页"
    assert time.process_time() - started < 5.0


def test_text_stops_at_the_character_cap() -> None:
    pages = [
        [f"第{page}页第{line}行：湛江港货物吞吐量持续增长。" for line in range(10)]
        for page in range(20)
    ]
    read = extract_pdf(text_pdf(pages), "http://port.test/long.pdf", max_pages=50, max_chars=1000)

    assert sum(len(page) for page in read.pages) == 1000
    assert len(read.pages) < 20


def test_pdf_max_pages_bounds_what_the_chain_reads(world: World) -> None:
    pages = [["封面"]] * 3 + [[NOTICE]]
    url = world.page("port.test", "/late.pdf", text_pdf(pages), content_type=PDF)
    world.results(QUESTION, [hit(url, "湛江港公告", "湛江港集团公告")])
    with make_service(world, world.searxng(), network={"max_pdf_pages": 3}) as service:
        answer = service.answer(QUESTION, {"entities": ["湛江港"]})

    assert answer.status != "answered"
    assert not [item for item in answer.evidence if item.basis == "page_body"]
