"""Answers to bundle: a loopback world with one article (or one PDF) a question is answered
from, and the answer's bundle, for the bundle, CLI and server tests."""

from __future__ import annotations

from dataclasses import dataclass

from external_query_service import ExternalAnswer, Settings
from external_query_service.testing import World, article, hit
from tests.support.pdfs import text_pdf
from tests.support.world import make_service

__all__ = [
    "AIRSHOW_PARAGRAPHS",
    "AIRSHOW_QUESTION",
    "EMPTY_QUESTION",
    "PDF_QUESTION",
    "Answered",
    "airshow_page",
    "answer_airshow",
    "answer_nothing",
    "answer_pdf",
    "pdf_pages",
]

AIRSHOW_QUESTION = "2026年珠海航展有哪些新机型亮相？"
AIRSHOW_PARAGRAPHS = (
    "第十六届中国航展11月在珠海开幕，多款新机型首次公开亮相，其中包括新型舰载预警机和"
    "大型无人运输机。",
    "主办方介绍，本届航展共有来自40多个国家和地区的参展商参加。",
)
PDF_QUESTION = "港口年报里集装箱吞吐量是多少？"
EMPTY_QUESTION = "一个没有任何搜索结果的问题？"
#: The PDF's pages: the answer is on page 2.
_PDF_PAGES = (
    ("港口年度报告", "第一章 概况：本报告介绍港口的基本情况。"),
    ("第二章 生产：2026年港口集装箱吞吐量达到850万标准箱，同比增长百分之六。",),
)


@dataclass(frozen=True)
class Answered:
    """An answer, its bundle, the settings of its world, and the URL it quotes."""

    answer: ExternalAnswer
    bundle: str
    settings: Settings
    url: str


def airshow_page(paragraphs: tuple[str, ...] = AIRSHOW_PARAGRAPHS) -> str:
    return article("珠海航展新机型集中亮相", paragraphs, published="2026-11-12")


def _answer(world: World, question: str, url: str, **sections: object) -> Answered:
    settings = world.settings(world.searxng(), **sections)
    with make_service(world, world.searxng(), **sections) as service:
        answer = service.answer(question)
    return Answered(answer, answer.bundle(settings=settings), settings, url)


def answer_airshow(world: World, **sections: object) -> Answered:
    """The air-show question answered from one article at ``news-a.test/airshow``."""
    url = world.page("news-a.test", "/airshow", airshow_page())
    world.results(AIRSHOW_QUESTION, [hit(url, "珠海航展", "新机型亮相", "2026-11-12")])
    return _answer(world, AIRSHOW_QUESTION, url, **sections)


def pdf_pages(pages: tuple[tuple[str, ...], ...] = _PDF_PAGES) -> bytes:
    return text_pdf(pages)


def answer_pdf(world: World) -> Answered:
    """The port question answered from page 2 of a PDF at ``port.test/report.pdf``."""
    url = world.page("port.test", "/report.pdf", pdf_pages(), content_type="application/pdf")
    world.results(PDF_QUESTION, [hit(url, "港口年度报告", "集装箱吞吐量", "2026-11-20")])
    return _answer(world, PDF_QUESTION, url)


def answer_nothing(world: World) -> Answered:
    """A question the search engine finds nothing for: ``insufficient_evidence``."""
    world.results(EMPTY_QUESTION, [])
    return _answer(world, EMPTY_QUESTION, "")
