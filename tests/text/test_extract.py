from __future__ import annotations

from datetime import date

import pytest

from external_query_service.errors import ExtractionFailed
from external_query_service.text.analyse import analyse_page
from external_query_service.text.decode import decode_body
from external_query_service.text.extract import extract_page, is_too_short, normalize_text
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
