"""What a page yields: navigation never leads an excerpt, and a short page that answers counts."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.errors import ExtractionFailed
from external_query_service.testing import LoopbackServer, World, article, hit
from external_query_service.text._analyse import analyse_page
from external_query_service.text._boilerplate import is_trail, link_texts, navigation_filter
from external_query_service.text._chunk import chunk_text

URL = "https://news.example/brief"
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=timezone(timedelta(hours=8)))
# A documentation page whose main text is about 180 characters of short sentences (none of
# them 60 characters long) and a code line, inside the usual navigation and footer.
DOCS_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Timeouts - Acme SDK docs</title></head>
<body><nav><a href="/">Docs</a> <a href="/api">API</a> <a href="/faq">FAQ</a></nav>
<main><h1>Timeouts</h1>
<p>Requests time out after 10 seconds.</p>
<p>Pass <code>timeout=30</code> to <code>Client()</code> to wait longer.</p>
<pre><code>client = Client(timeout=30)</code></pre>
<p>A timeout raises <code>TimeoutError</code>.</p>
<p>Retries do not reset the clock.</p>
</main><footer><a href="/privacy">Privacy</a> <a href="/terms">Terms</a></footer></body></html>
"""


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


def test_a_short_documentation_page_answers_through_the_pipeline(loopback: LoopbackServer) -> None:
    world = World(loopback)
    question = "What is the Acme client request timeout?"
    url = world.page("docs.acme.test", "/timeouts", DOCS_PAGE)
    world.results(question, [hit(url, "Timeouts - Acme SDK docs", "Timeouts")])
    with ExternalQueryService(world.settings(world.searxng()), clock=fixed_clock(NOW)) as service:
        answer = service.answer(question)
    assert answer.status == "answered"
    [evidence] = answer.evidence
    assert "Requests time out after 10 seconds." in evidence.snippet
    assert evidence.url == url


def test_a_short_page_that_names_no_query_term_is_still_too_short() -> None:
    # The same page asked about something it never mentions: nothing on it is a sentence of
    # MIN_SENTENCE_WEIGHTED, and none of its short sentences names a query term.
    with pytest.raises(ExtractionFailed) as caught:
        analyse(DOCS_PAGE, "湛江明天天气")
    assert caught.value.reason == "too_short"


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
