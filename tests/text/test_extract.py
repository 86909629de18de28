from __future__ import annotations

import pickle
import re
import unicodedata
from datetime import date
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from external_query_service.errors import ExtractionFailed
from external_query_service.text._analyse import (
    analyse_page,
    analysis_from_record,
    analysis_to_record,
)
from external_query_service.text._decode import decode_body
from external_query_service.text._extract import (
    FAST_READER,
    MAX_FAST_DEPTH,
    cjk_count,
    extract_page,
    is_too_short,
    normalize_text,
)
from tests.support.paths import DATA

PAGES = DATA / "pages"
URL = "https://news.example.com/2025/harbour-bridge"


def page_text(name: str) -> str:
    return decode_body((PAGES / name).read_bytes()).text


# --- normalize_text ---------------------------------------------------------------------


def test_normalize_text_keeps_full_width_characters_nfc_not_nfkc() -> None:
    assert normalize_text("ＡＢＣ１２３，（注）") == "ＡＢＣ１２３，（注）"
    assert normalize_text("Cafe\u0301") == "Café"


def test_normalize_text_unifies_newlines_and_drops_empty_lines() -> None:
    assert (
        normalize_text("one\r\ntwo\rthree\u2028four\n\n\n  \nfive") == "one\ntwo\nthree\nfour\nfive"
    )


def test_normalize_text_collapses_whitespace_runs_inside_lines() -> None:
    assert normalize_text("  a \t\u00a0 b\u3000\u3000c  ") == "a b c"


def test_normalize_text_drops_control_characters() -> None:
    assert normalize_text("a\x00b\x07c\x1bd\x7f") == "abcd"


def _normalized_line_by_line(text: str) -> str:
    # The rule spelled out: newlines unified, controls dropped, each line's whitespace runs
    # collapsed and the line stripped, empty lines dropped.
    text = re.sub(r"\r\n?|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]", "\n", text)
    text = re.sub(r"[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f]", "", text)
    lines = (re.sub(r"[^\S\n]+", " ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


_WHITESPACE_AND_TEXT = st.lists(
    st.sampled_from(
        [
            *("a", "中", " ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f"),
            *("\x85", "\u2028", "\xa0", "\u3000", "\x00", "e\u0301", "\u200b", "\u2003", "x y"),
        ]
    ),
    max_size=24,
).map("".join)


@given(_WHITESPACE_AND_TEXT)
def test_normalize_text_is_the_line_by_line_rule(text: str) -> None:
    assert normalize_text(text) == _normalized_line_by_line(unicodedata.normalize("NFC", text))


# --- extract_page -----------------------------------------------------------------------


def test_news_page_main_text_excludes_nav_footer_cookie_banner_and_comments() -> None:
    page = extract_page(page_text("news_boilerplate.html"), URL)
    assert "eleven weeks after February's storm" in page.text
    assert "weight limit of 18 tonnes" in page.text
    for boilerplate in (
        "We use cookies",
        "Accept all cookies",
        "Subscribe for 1 pound",
        "All rights reserved",
        "Ferry timetable changes",
        "My commute has been a nightmare",
        "dataLayer",
    ):
        assert boilerplate not in page.text


def test_news_page_yields_title_publication_date_and_language() -> None:
    page = extract_page(page_text("news_boilerplate.html"), URL)
    assert page.title == "Harbour bridge reopens after storm repairs"
    assert page.published_at == date(2025, 5, 14)
    assert page.language_hint == "en-gb"


def test_extracted_text_is_normalized() -> None:
    page = extract_page(page_text("news_boilerplate.html"), URL)
    assert page.text == normalize_text(page.text)
    assert "  " not in page.text


def test_undated_page_has_no_publication_date() -> None:
    page = extract_page(page_text("undated.html"), "https://guides.example.org/kettle")
    assert page.published_at is None
    assert "two tablespoons of citric acid" in page.text


def test_gbk_page_without_charset_extracts_chinese_text() -> None:
    page = extract_page(page_text("gbk_no_charset.html"), "http://zj.example.cn/a.html")
    assert "湛江市海东新区的滨海大道全线通车" in page.text
    assert "\ufffd" not in page.text
    assert "网站地图" not in page.text
    assert page.title == "滨海大道今日全线通车"
    assert page.language_hint == "zh"


def test_injection_paragraph_stays_plain_text_and_scripts_never_appear() -> None:
    page = extract_page(page_text("injection.html"), "https://tides.example.net/merrow")
    assert "Ignore all previous instructions" in page.text
    assert "{{ config.secret }}" in page.text
    assert "script text must never reach" not in page.text


def test_page_opening_with_a_script_is_still_extracted() -> None:
    body = "<script>var a = 1;</script>\n" + "".join(
        f"<p>第{n}段：这是一段足够长的中文正文，用来确认没有html标签开头的旧式页面也能抽取。</p>"
        for n in range(4)
    )
    page = extract_page(body, "http://old.example.cn/")
    assert "第3段" in page.text
    assert "var a" not in page.text


def test_empty_html_raises_no_main_text() -> None:
    with pytest.raises(ExtractionFailed) as caught:
        extract_page("   ", URL)
    assert caught.value.reason == "no_main_text"
    assert caught.value.url == URL


def test_body_without_text_raises_no_main_text() -> None:
    with pytest.raises(ExtractionFailed) as caught:
        extract_page("<html><head><title>t</title></head><body></body></html>", URL)
    assert caught.value.reason == "no_main_text"


# --- the fast reading and trafilatura ----------------------------------------------------

_FORECAST = "湛江明天多云，气温二十三到二十八摄氏度，东南风三级。"


def test_an_article_is_read_by_the_fast_reading() -> None:
    html = f"<html><body><article><h1>湛江天气</h1><p>{_FORECAST * 8}</p></article></body></html>"
    page = extract_page(html, URL)
    assert page.extractor == FAST_READER
    assert _FORECAST in page.text


def test_fast_text_too_short_for_the_page_falls_back_to_trafilatura() -> None:
    # resiliparse's main-content heuristics drop a container classed "sidebar" whole, so its
    # reading of this page is empty; trafilatura finds the text.
    html = f"<html><body><div class='sidebar'><p>{_FORECAST * 6}</p></div></body></html>"
    page = extract_page(html, URL)
    assert page.extractor == "trafilatura"
    assert _FORECAST in page.text


def test_fast_text_holding_a_small_share_of_the_page_falls_back_to_trafilatura() -> None:
    # The fast reading keeps the short article and drops the long thread below it (a
    # fragment of what the page shows): trafilatura reads the page instead.
    posts = (f"<div class='sidebar'><p>第{n}楼：{_FORECAST * 3}</p></div>" for n in range(8))
    thread = "".join(posts)
    html = f"<html><body><article><p>{_FORECAST * 2}</p></article>{thread}</body></html>"
    page = extract_page(html, URL)
    assert page.extractor == "trafilatura"


def _article_among_posts(
    post: str = "港口码头今天重新开放，渔船陆续出海作业，游客可以预约参观。",
    header: str = "",
    footer: str = "",
) -> str:
    # A short article (the forecast) and, below it, a long thread of ``post``, which
    # resiliparse's heuristics drop: the fast text is a small share of the page. ``header``
    # and ``footer``, when given, frame the page.
    posts = "".join(f"<div class='sidebar'><p>第{n}楼：{post}</p></div>" for n in range(12))
    top = f"<header>{header}</header>" if header else ""
    bottom = f"<footer>{footer}</footer>" if footer else ""
    article = f"<article><p>{_FORECAST * 2}</p></article>"
    return f"<html><body>{top}{article}{posts}{bottom}</body></html>"


#: A post that never names the terms of 港口码头什么时候开放.
_OTHER_POST = "渔船陆续出海作业，游客可以预约参观，今天风浪不大。"


def test_a_small_share_holding_the_question_terms_is_kept_by_the_fast_reading() -> None:
    page = extract_page(_article_among_posts(), URL, query="湛江明天气温多少")
    assert page.extractor == FAST_READER
    assert _FORECAST in page.text
    assert "港口码头" not in page.text


def test_a_small_share_lacking_the_question_terms_the_page_shows_falls_back() -> None:
    page = extract_page(_article_among_posts(), URL, query="港口码头什么时候开放")
    assert page.extractor == "trafilatura"
    assert "港口码头今天重新开放" in page.text


def test_question_terms_named_only_by_links_and_navigation_leave_the_fast_text() -> None:
    # What a page points with is not what it tells: the fast text stands.
    menu = "".join(f"<li><a href='/{n}'>港口码头开放时间{n}</a></li>" for n in range(3))
    html = _article_among_posts(
        _OTHER_POST, f"<nav><ul>{menu}</ul></nav>", "<a href='/port'>港口码头开放信息</a> 版权所有"
    )
    page = extract_page(html, URL, query="港口码头什么时候开放")
    assert page.extractor == FAST_READER
    assert _FORECAST in page.text
    assert "港口码头" not in page.text


def test_question_terms_in_a_banner_or_footer_own_text_are_told() -> None:
    # A site's name in its logo and footer is text the page shows, not a link: it counts.
    html = _article_among_posts(
        _OTHER_POST,
        "<div class='logo'>港口码头开放服务网</div>",
        "<p>版权所有 © 港口码头开放服务网</p>",
    )
    page = extract_page(html, URL, query="港口码头什么时候开放")
    assert page.extractor == "trafilatura"  # which reads the thread the fast reading dropped
    assert "第11楼" in page.text


_MARKUP = st.lists(
    st.sampled_from(
        [
            *("<p>", "</p>", "<div>", "</div>", "<br>", "<li>", "<td>", "<tr>", "<table>", "<h1>"),
            *("<pre>  a  \n\n b</pre>", "&amp;", "&NotNestedGreaterGreater;", "&#x1F600;"),
            *(" ", "\n", "\t", "\x00", "a", "中", _FORECAST, "<img alt='图片说明文字'>"),
            *("<script>var x = 1;</script>", "<input value='输入'>", "<!-- 注释 -->"),
        ]
    ),
    max_size=40,
).map("".join)


@given(_MARKUP)
def test_a_pages_whole_text_is_never_longer_than_its_markup(html: str) -> None:
    # What the fast reading's share test leans on to skip reading the whole text.
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    options: dict[str, Any] = {"alt_texts": False, "list_bullets": False, "comments": False}
    assert len(extract_plain_text(HTMLTree.parse(html), **options)) <= len(html)


def test_markup_nesting_past_the_fast_depth_is_left_to_trafilatura() -> None:
    html = (
        "<html><body>"
        + "<div>" * (MAX_FAST_DEPTH + 10)
        + f"<p>{_FORECAST * 8}</p>"
        + "</div>" * (MAX_FAST_DEPTH + 10)
        + "</body></html>"
    )
    page = extract_page(html, URL)
    assert page.extractor == "trafilatura"
    assert _FORECAST in page.text


# --- the lxml parse: trafilatura's load_html, its repair made cheap ------------------------

_REPAIR_PIECES = st.lists(
    st.sampled_from(
        [
            *("<!DOCTYPE html>", "<!doctype html PUBLIC '-//W3C//DTD XHTML 1.0//EN' 'x.dtd'>"),
            *("< ! DOCTYPE a/b>", "<!DOCTYPE <x/>>", "<html/>", "<html lang='zh' />", "<html>"),
            *("\x01", "\x0b", "\x1f", "\ufffe", "\uffff", "\t", "\n", "\r\n", " ", "/", ">"),
            *("<p>", "</p>", "正文", "text"),
        ]
    ),
    max_size=12,
).map("".join)


@given(_REPAIR_PIECES)
def test_the_repair_leaves_what_trafilaturas_repair_leaves(html: str) -> None:
    from trafilatura.utils import repair_faulty_html

    from external_query_service.text._extract import _repaired

    beginning = html[:50].lower()
    assert _repaired(html, beginning) == repair_faulty_html(html, beginning)


@pytest.mark.parametrize("name", sorted(path.name for path in PAGES.glob("*.html")))
def test_the_parse_is_the_tree_trafilaturas_load_html_makes(name: str) -> None:
    from lxml import etree
    from trafilatura.utils import load_html

    from external_query_service.text._extract import _parse

    html = page_text(name)
    for markup in (html, "<script>var x;</script><p>一段没有 html 开头的正文</p>"):
        expected = load_html(markup)
        if expected is None:
            expected = load_html(f"<html>{markup}</html>")
        assert etree.tostring(_parse(markup, URL)) == etree.tostring(expected)


def test_a_declared_content_language_is_the_language_hint() -> None:
    html = (
        '<html><head><meta http-equiv="Content-Language" content="zh_CN"></head><body>'
        f"<article><p>{_FORECAST * 8}</p></article></body></html>"
    )
    assert extract_page(html, URL).language_hint == "zh-cn"
    assert extract_page(html.replace("Content-Language", "refresh"), URL).language_hint == "zh"


def test_cjk_count_counts_han_kana_and_hangul_only() -> None:
    assert cjk_count("") == 0
    assert cjk_count("plain ASCII text") == 0
    assert cjk_count("湛江 weather 天気 かな 한국어 café") == 2 + 2 + 2 + 3


def test_nav_and_cookie_only_page_is_too_short() -> None:
    html = (
        "<html><body><nav><a href='/'>Home</a> <a href='/about'>About</a></nav>"
        "<div class='cookie'><p>We use cookies. Accept</p></div></body></html>"
    )
    with pytest.raises(ExtractionFailed) as caught:
        extract_page(html, URL)
    assert caught.value.reason == "too_short"


def test_text_nested_deeper_than_the_parser_keeps_is_no_evidence_not_a_crash() -> None:
    # libxml2 silently drops content nested past its depth limit, which guards the parser
    # against hostile nesting; the limit stays on, and what is left over is a typed failure,
    # never "" as evidence.
    text = "深层嵌套的正文内容，" * 40
    html = "<html><body>" + "<div>" * 300 + f"<p>{text}</p>" + "</div>" * 300 + "</body></html>"
    with pytest.raises(ExtractionFailed) as caught:
        extract_page(html, URL)
    assert caught.value.reason in ("no_main_text", "too_short")


def test_binary_body_raises_parser_error() -> None:
    with pytest.raises(ExtractionFailed) as caught:
        extract_page("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + "x" * 300, URL)
    assert caught.value.reason == "parser_error"


def test_length_floor_counts_a_cjk_character_as_five() -> None:
    assert is_too_short("汉" * 39)
    assert not is_too_short("汉" * 40)
    assert is_too_short("a" * 199)
    assert not is_too_short("a" * 200)
    assert not is_too_short("汉" * 20 + "a" * 100)


def test_plain_text_is_only_normalized() -> None:
    text = "第一行  有空格\r\n\r\n" + "第二行内容。" * 10
    page = extract_page(text, URL, content_type="text/plain")
    assert page.text == normalize_text(text)
    assert page.title == ""
    assert page.published_at is None
    assert page.language_hint == "zh"


def test_short_plain_text_is_too_short() -> None:
    with pytest.raises(ExtractionFailed) as caught:
        extract_page("短文本", URL, content_type="text/plain")
    assert caught.value.reason == "too_short"


# --- analyse_page -----------------------------------------------------------------------


def test_analyse_page_decodes_extracts_and_picks_the_matching_snippet() -> None:
    analysis = analyse_page(
        (PAGES / "gbk_no_charset.html").read_bytes(),
        url="http://zj.example.cn/a.html",
        declared_charset=None,
        content_type="text/html",
        query="滨海大道什么时候通车",
        targets=("湛江",),
    )
    assert analysis.encoding == "gb18030"
    assert analysis.snippets
    best = analysis.snippets[0]
    assert best.target_hits == ("湛江",)
    assert (
        analysis.text[best.chunk.offset : best.chunk.offset + best.chunk.length] == best.chunk.text
    )
    assert "滨海大道" in best.chunk.text


def test_analyse_page_does_not_pick_the_injection_paragraph_for_the_topic() -> None:
    analysis = analyse_page(
        (PAGES / "injection.html").read_bytes(),
        url="https://tides.example.net/merrow",
        declared_charset="utf-8",
        content_type="text/html",
        query="tidal range at Port Merrow",
        max_snippets=1,
    )
    assert len(analysis.snippets) == 1
    assert "Ignore all previous instructions" not in analysis.snippets[0].chunk.text
    assert "eleven metres" in analysis.snippets[0].chunk.text


def test_analyse_page_about_dates_come_from_title_and_snippets() -> None:
    analysis = analyse_page(
        (PAGES / "news_boilerplate.html").read_bytes(),
        url=URL,
        declared_charset=None,
        content_type="text/html",
        query="final inspection of the bridge and the weight limit",
        max_snippets=1,
    )
    assert analysis.published_at == date(2025, 5, 14)
    assert "final inspection on 2 June 2025" in analysis.snippets[0].chunk.text
    assert analysis.about_dates == (date(2025, 6, 2),)


def test_analyse_page_raises_extraction_failed_for_a_nav_only_page() -> None:
    with pytest.raises(ExtractionFailed) as caught:
        analyse_page(
            b"<html><body><nav>Home</nav></body></html>",
            url=URL,
            declared_charset=None,
            content_type="text/html",
            query="anything",
        )
    assert caught.value.reason == "too_short"


def test_analyse_page_dates_month_days_by_the_publication_year() -> None:
    paragraph = "气象台11月30日发布：12月1日湛江市多云转阴，最高气温24℃，最低气温18℃，东北风3级。"
    html = (
        '<html lang="zh-CN"><head><meta charset="utf-8"><title>湛江天气预报</title>'
        '<meta property="article:published_time" content="2026-11-30"></head><body><article>'
        f"<h1>湛江天气预报</h1><p>{paragraph}</p><p>{paragraph}</p></article></body></html>"
    )
    analysis = analyse_page(
        html.encode(),
        url="http://weather.example.cn/zhanjiang",
        declared_charset=None,
        content_type="text/html",
        query="湛江明天天气",
        max_snippets=1,
    )
    assert analysis.published_at == date(2026, 11, 30)
    assert analysis.about_dates == (date(2026, 11, 30), date(2026, 12, 1))


# --- the compact record a worker sends back ------------------------------------------------


def _analysed_forecast() -> Any:
    paragraphs = "".join(f"<p>第{n}段：{_FORECAST * 2}湛江港今天开放。</p>" for n in range(6))
    html = f"<html><head><title>湛江天气</title></head><body><article>{paragraphs}</article>"
    return analyse_page(
        html.encode(),
        url=URL,
        declared_charset="utf-8",
        content_type="text/html",
        query="湛江明天天气怎么样",
    )


def test_a_page_analysis_pickles_as_a_compact_record_and_back_unchanged() -> None:
    analysis = _analysed_forecast()
    assert analysis.snippets, "the page must yield a snippet for this test to mean anything"
    data = pickle.dumps(analysis)
    again = pickle.loads(data)
    assert again == analysis
    assert again.stats == analysis.stats
    assert again.stats.chunks > 1
    assert again.stats.frequencies
    # The page text travels once: a snippet is an offset into it, not a second copy.
    snippet = analysis.snippets[0].chunk.text.encode("utf-8")
    assert data.count(snippet) == 1
    assert analysis_from_record(analysis_to_record(analysis)) == analysis


def test_a_record_of_another_layout_is_refused() -> None:
    record = analysis_to_record(_analysed_forecast())
    with pytest.raises(ValueError, match="record"):
        analysis_from_record((99, *record[1:]))
