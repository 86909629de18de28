"""PDFs become evidence: text per page (CJK as written), the page in the evidence URL, caps
on pages, and scanned or encrypted files refused by name."""

from __future__ import annotations

import os
import threading
import time
import zlib
from pathlib import Path

import pytest

from external_query_service.errors import ExtractionFailed
from external_query_service.testing import World, hit
from external_query_service.text._analyse import (
    PageAnalysis,
    analyse_page,
    analysis_from_json,
    analysis_to_json,
)
from external_query_service.text._pdf import (
    PdfLimits,
    PdfText,
    close_readers,
    extract_pdf,
    reader_stats,
)
from external_query_service.text._pdf_reader import decoded_within
from tests.support.pdfs import (
    PdfPage,
    deflate_bomb,
    encrypted_pdf,
    nested_bomb,
    page_tree_bomb,
    shared_stream_bomb,
    text_pdf,
)
from tests.support.world import make_service

QUESTION = "湛江港今年货物吞吐量是多少？"
NOTICE = "湛江港集团公告：今年前十个月湛江港货物吞吐量达到2.6亿吨，同比增长百分之八。"
PDF = "application/pdf"


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


# -- bombs: read in a bounded reader process, never in this one --------------------------

GOOD = ("湛江港集团公告：今年前十个月湛江港货物吞吐量达到2.6亿吨。",)


def read(body: bytes, limits: PdfLimits | None = None) -> PdfText:
    return extract_pdf(
        body, "http://port.test/b.pdf", max_pages=50, max_chars=10_000, limits=limits
    )


def reason_of(body: bytes, limits: PdfLimits | None = None) -> str:
    with pytest.raises(ExtractionFailed) as failed:
        read(body, limits)
    return failed.value.reason


def test_pdfium_never_runs_in_this_process() -> None:
    assert read(notice_pdf()).page_count == 3
    reader = reader_stats()["pid"]

    assert reader not in (0, os.getpid())
    assert Path(f"/proc/{reader}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(os.getpid())
    assert "pdfium" not in Path("/proc/self/maps").read_text()
    assert "pdfium" in Path(f"/proc/{reader}/maps").read_text()


def test_the_reader_runs_in_a_capped_address_space() -> None:
    read(notice_pdf())
    limits = Path(f"/proc/{reader_stats()['pid']}/limits").read_text()
    [line] = [line for line in limits.splitlines() if line.startswith("Max address space")]

    assert line.split()[3:5] == [str(PdfLimits().memory_bytes)] * 2


def test_a_deflate_bomb_is_content_too_large_and_its_reader_replaced() -> None:
    bomb = deflate_bomb(2_000_000_000, lines=GOOD)  # 2 GB of blanks in about 2 MB
    assert len(bomb) < 3_000_000
    before = reader_stats()

    assert reason_of(bomb) == "content_too_large"
    after = reader_stats()
    assert after["pid"] == 0  # the reader that saw it is gone: the next PDF gets a fresh one
    assert read(notice_pdf()).page_count == 3
    assert reader_stats()["started"] == after["started"] + 1 > before["started"]


def test_pages_sharing_one_huge_stream_are_content_too_large() -> None:
    bomb = shared_stream_bomb(50, 200_000_000, lines=GOOD)

    assert len(bomb) < 500_000
    assert reason_of(bomb) == "content_too_large"


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_decoded_bytes_are_counted_through_nested_flate_layers(layers: int) -> None:
    data = b" " * 3_000_000
    for _ in range(layers):
        data = zlib.compress(data, 9)
    body = b"1 0 obj\n<< /Length %d >>\nstream\n%s\nendstream\nendobj\n" % (len(data), data)

    assert decoded_within(body, 3_500_000, 10_000_000)
    assert not decoded_within(body, 2_000_000, 10_000_000)  # the stream's cap
    assert not decoded_within(body + body + body, 3_500_000, 8_000_000)  # the document's


def test_a_document_past_its_cpu_allowance_ends_its_reader_as_cpu_deadline() -> None:
    # Small on disk and under the decoded caps, but every page parses 32 MiB of operators.
    bomb = shared_stream_bomb(50, 32 * 1024 * 1024, lines=GOOD, operator=b"q Q\n")
    before = reader_stats()["killed"]

    assert reason_of(bomb, PdfLimits(cpu_s=1.0)) == "cpu_deadline"
    assert reader_stats()["killed"] == before + 1
    assert reader_stats()["pid"] == 0


def test_a_document_past_the_reader_memory_is_content_too_large() -> None:
    # 60 MiB of path operators decode under the stream cap, but PDFium's objects for them
    # need more than a 96 MiB address space.
    bomb = shared_stream_bomb(1, 60 * 1024 * 1024, lines=GOOD, operator=b"0 0 m 1 1 l S\n")

    assert reason_of(bomb, PdfLimits(memory_bytes=96 * 1024 * 1024)) == "content_too_large"
    assert read(notice_pdf()).page_count == 3  # a fresh reader, with the default space


def test_closing_the_readers_frees_a_thread_waiting_on_one() -> None:
    bomb = shared_stream_bomb(50, 32 * 1024 * 1024, lines=GOOD, operator=b"q Q\n")
    reasons: list[str] = []

    def reading() -> None:
        reasons.append(reason_of(bomb, PdfLimits(cpu_s=60.0)))

    thread = threading.Thread(target=reading)
    thread.start()
    for _ in range(1200):  # until the reader is busy with the document (a minute at most)
        pid = reader_stats()["pid"]
        if pid and int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11]) > 50:
            break
        time.sleep(0.05)
    close_readers()
    thread.join(30)

    assert not thread.is_alive()
    assert reasons == ["worker_lost"]
    assert reader_stats()["pid"] == 0


@pytest.mark.parametrize("processes", [0, 1])
def test_bombs_among_good_pages_leave_the_answer_to_the_good_ones(
    world: World, processes: int
) -> None:
    deflate = world.page(
        "bomb.test", "/deflate.pdf", deflate_bomb(2_000_000_000, lines=GOOD), content_type=PDF
    )
    shared = world.page(
        "bomb.test",
        "/shared.pdf",
        shared_stream_bomb(50, 200_000_000, lines=GOOD),
        content_type=PDF,
    )
    good = world.page("port.test", "/notice.pdf", notice_pdf(), content_type=PDF)
    world.results(
        QUESTION,
        [
            hit(deflate, "湛江港公告", "湛江港"),
            hit(shared, "湛江港公告", "湛江港"),
            hit(good, "湛江港公告", "湛江港"),
        ],
    )
    with make_service(world, world.searxng(), analysis={"processes": processes}) as service:
        service.warm_up()
        answer = service.answer(QUESTION, {"entities": ["湛江港"]})

    assert answer.status == "answered"
    assert {item.url for item in answer.evidence} == {f"{good}#page=3"}
    failures = answer.audit.named("attempt")[0].detail["page_failures"]
    assert {line.split()[0] for line in failures} == {deflate, shared}
    assert {line.split()[1] for line in failures} <= {
        "not_a_document:content_too_large",
        "cut_off:analysis",
    }
    assert "pdfium" not in Path("/proc/self/maps").read_text()


def test_a_reader_outlives_the_thread_that_started_it() -> None:
    close_readers()
    thread = threading.Thread(target=read, args=(notice_pdf(),))
    thread.start()
    thread.join(60)
    started = reader_stats()["started"]

    assert read(notice_pdf()).page_count == 3  # the same reader, from another thread
    assert reader_stats()["started"] == started
