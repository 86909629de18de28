"""What a page yields: navigation never leads an excerpt, and a short page that answers counts."""

from __future__ import annotations

import pytest

from external_query_service.errors import ExtractionFailed
from external_query_service.testing import article
from external_query_service.text.analyse import analyse_page
from external_query_service.text.boilerplate import is_trail, link_texts, navigation_filter
from external_query_service.text.chunk import chunk_text

URL = "https://news.example/brief"


def analyse(html: str, query: str) -> list[str]:
    analysis = analyse_page(
        html.encode("utf-8"),
        url=URL,
        declared_charset="utf-8",
        content_type="text/html",
        query=query,
        min_score=3000,
    )
    return [item.chunk.text for item in analysis.snippets]


# -- boilerplate never leads an excerpt ------------------------------------------------------


def test_a_short_articles_snippet_does_not_open_with_its_menu() -> None:
    page = article("湛江市天气预报", ["湛江明天多云转晴，最高气温24℃，最低气温18℃，东北风3级。"])
    snippets = analyse(page, "湛江明天天气怎么样")
    assert snippets
    assert "栏目" not in snippets[0]
    assert snippets[0].startswith("湛江")


def test_link_lines_and_trails_belong_to_no_chunk() -> None:
    markup = '<a href="/">首页</a><a href="/n">新闻</a><a href="/s">体育</a>'
    lines = ["首页", "新闻", "体育", "首页 > 新闻 > 正文", "湛江明天多云转晴。", "首页 新闻 体育"]
    text = "\n".join([*lines, "更多内容请看下文。"])
    chunks = chunk_text(text, skip_line=navigation_filter(markup))
    assert [chunk.text for chunk in chunks] == ["湛江明天多云转晴。", "更多内容请看下文。"]
    for chunk in chunks:
        assert text[chunk.offset : chunk.offset + chunk.length] == chunk.text


def test_prose_that_contains_a_link_keeps_its_place() -> None:
    markup = '<p>详情见<a href="/x">气象台公告</a>。</p>'
    assert link_texts(markup) == frozenset({"气象台公告"})
    text = "详情见气象台公告。"
    assert [c.text for c in chunk_text(text, skip_line=navigation_filter(markup))] == [text]
    assert not is_trail("价格 > 100 元的商品打八折")
    assert is_trail("联系我们 | 广告服务 | 隐私政策")


# -- a short page that answers is evidence ---------------------------------------------------


def test_a_one_sentence_news_brief_is_evidence() -> None:
    brief = "<html><body><p>湛江明天多云转晴，最高气温24℃。</p></body></html>"
    snippets = analyse(brief, "湛江明天天气")
    assert snippets == ["湛江明天多云转晴，最高气温24℃。"]


def test_a_short_english_brief_is_evidence() -> None:
    brief = (
        "<html><body><p>The harbour bridge reopens on Monday after two weeks of repairs, "
        "the city said.</p></body></html>"
    )
    snippets = analyse(brief, "when does the harbour bridge reopen")
    assert snippets
    assert "reopens on Monday" in snippets[0]


@pytest.mark.parametrize(
    "body",
    [
        "<nav><a href='/'>Home</a> <a href='/about'>About</a></nav><p>We use cookies. Accept</p>",
        "<p>加载中</p>",
        "<p>Home</p><p>About</p><p>Contact</p>",
    ],
)
def test_a_page_without_a_sentence_is_still_refused(body: str) -> None:
    with pytest.raises(ExtractionFailed) as caught:
        analyse(f"<html><body>{body}</body></html>", "home")
    assert caught.value.reason in ("too_short", "no_main_text")
