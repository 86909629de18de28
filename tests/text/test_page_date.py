"""The publication date read from the lexbor tree: each stage of the search, and the same date
htmldate finds on the lxml parse of the same page."""

from __future__ import annotations

from datetime import date

import pytest

resiliparse_html = pytest.importorskip("resiliparse.parse.html")

from external_query_service.text._extract import _parse, _published  # noqa: E402
from external_query_service.text._page_date import page_date  # noqa: E402

URL = "https://news.example.com/story"


def _page(head: str = "", body: str = "") -> str:
    paragraph = "<p>The harbour bridge reopened to traffic after two years of repairs.</p>"
    return f"<html><head><title>Bridge</title>{head}</head><body>{body}{paragraph}</body></html>"


def _lexbor_date(html: str, url: str | None = URL) -> date | None:
    return page_date(resiliparse_html.HTMLTree.parse(html), url)


def _htmldate(html: str, url: str | None = URL) -> date | None:
    return _published(_parse(html, url or ""), url or "")


CASES = {
    "url": (_page(), "https://news.example.com/2021/03/04/bridge", date(2021, 3, 4)),
    "meta name": (_page('<meta name="date" content="2020-05-06">'), URL, date(2020, 5, 6)),
    "meta property": (
        _page('<meta property="article:published_time" content="2019-02-03T08:00:00Z">'),
        URL,
        date(2019, 2, 3),
    ),
    # An update time is only a reserve: the published time later in the head wins.
    "modified is a reserve": (
        _page(
            '<meta property="og:updated_time" content="2023-09-09">'
            '<meta property="article:published_time" content="2019-02-03">'
        ),
        URL,
        date(2019, 2, 3),
    ),
    "modified alone": (
        _page('<meta property="og:updated_time" content="2023-09-09">'),
        URL,
        date(2023, 9, 9),
    ),
    "itemprop": (
        _page('<meta itemprop="datePublished" content="2018-11-12">'),
        URL,
        date(2018, 11, 12),
    ),
    "json-ld": (
        _page(
            '<script type="application/ld+json">'
            '{"@type": "NewsArticle", "datePublished": "2017-06-07T10:00:00+08:00"}</script>'
        ),
        URL,
        date(2017, 6, 7),
    ),
    "abbr": (
        _page(body='<abbr class="published" title="2016-08-09">Aug 9</abbr>'),
        URL,
        date(2016, 8, 9),
    ),
    "byline element": (
        _page(body='<div class="byline">Posted 2015-10-11 by the desk</div>'),
        URL,
        date(2015, 10, 11),
    ),
    # Only the first of id and class, in the order written, carries a date cue.
    "first of id and class": (
        _page(body='<div id="date" class="x">02.01.2014</div>'),
        URL,
        date(2014, 1, 2),
    ),
    "time pubdate": (
        _page(body='<time datetime="2013-03-04T09:00" pubdate="pubdate">March</time>'),
        URL,
        date(2013, 3, 4),
    ),
    "media left out": (
        _page(body='<div class="date"><svg><text>2012-01-01</text></svg>2012-05-06</div>'),
        URL,
        date(2012, 5, 6),
    ),
    "author-written": (
        _page(body="<p>Datum: 05.03.2021</p>"),
        URL,
        date(2021, 3, 5),
    ),
    "bare date in text": (
        _page(body="<p>Figures as of 2022-07-08, the council said.</p>"),
        URL,
        date(2022, 7, 8),
    ),
    "canonical link": (
        _page('<link rel="canonical" href="https://news.example.com/2011/12/13/bridge">'),
        None,
        date(2011, 12, 13),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_stage_finds_the_date_htmldate_finds(case: str) -> None:
    html, url, expected = CASES[case]
    assert _lexbor_date(html, url) == expected
    assert _htmldate(html, url) == expected


def test_a_class_first_without_a_cue_hides_an_id_that_has_one() -> None:
    html = _page(body='<div class="x" id="date">02.01.2014</div>')
    assert _lexbor_date(html) is None
    assert _htmldate(html) is None


def test_a_timestamp_in_a_comment_is_not_a_date() -> None:
    # lxml's parse drops comments, so htmldate never reads a CMS's generation stamp.
    html = _page(body="<!-- App=CMS 3.1, PublishDate=2022-09-29 13:46:42 -->")
    assert _lexbor_date(html) is None
    assert _htmldate(html) is None


def test_a_date_only_in_a_script_is_not_the_page_date() -> None:
    html = _page(body='<script>var built = "2016-01-02";</script>')
    assert _lexbor_date(html) is None
    assert _htmldate(html) is None


def test_a_script_or_style_is_cut_out_of_the_text_it_stands_in() -> None:
    # The text on both sides of a removed script joins up, as when lxml drops the element.
    joined = _page(body='<p>As of 2022-07<script>var a = "<style>";</script>-08.</p>')
    assert _lexbor_date(joined) == _htmldate(joined) == date(2022, 7, 8)
    styled = _page(body="<style>/* 2016-01-02 */</style><p>No date here.</p>")
    assert _lexbor_date(styled) is None
    assert _htmldate(styled) is None


def test_json_ld_of_another_type_spelling_is_not_read() -> None:
    # htmldate matches the script's type exactly; lexbor's selectors ignore its case.
    html = _page('<script type="Application/LD+JSON">{"datePublished": "2017-06-07"}</script>')
    assert _lexbor_date(html) is None
    assert _htmldate(html) is None


@pytest.mark.timeout(60)  # a rescan per opening would take hours: a hang, not a slow test
@pytest.mark.parametrize("opening", ["<!--", "<script>", "<style>x<script>", "<scripts", "<"])
def test_raw_text_full_of_openings_is_read_in_one_pass(opening: str) -> None:
    # <plaintext> keeps everything after it as raw text, which lexbor writes back unescaped:
    # 200,000 comment or script openings that nothing closes.
    html = _page(body="<plaintext>" + opening * 200_000)
    assert _lexbor_date(html) is None


def test_an_elements_own_text_runs_across_a_comment() -> None:
    # lxml's parse drops the comment, so htmldate reads the <time>'s text as one.
    html = _page(body="<time>March<!-- x --> 5, 2021 at noon</time>")
    assert _lexbor_date(html) == _htmldate(html) == date(2021, 3, 5)


def test_a_page_without_a_date_gives_none() -> None:
    assert _lexbor_date(_page()) is None


def test_an_implausible_date_is_refused() -> None:
    html = _page('<meta name="date" content="1850-01-01">')
    assert _lexbor_date(html) is None
    assert _htmldate(html) is None


@pytest.mark.parametrize(
    "html", ["", "<", "<meta content>", "\ufffe" * 10, "<abbr data-utime=9e99>"]
)
def test_odd_markup_gives_none_and_no_error(html: str) -> None:
    assert _lexbor_date(html) is None
