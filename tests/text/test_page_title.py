"""The page title read from the lexbor tree: each source trafilatura tries, in its order, and
the same title trafilatura finds on the lxml parse of the same page."""

from __future__ import annotations

import pytest

resiliparse_html = pytest.importorskip("resiliparse.parse.html")

from external_query_service.text import _extract  # noqa: E402
from external_query_service.text._page_title import page_title  # noqa: E402

URL = "https://news.example.com/story"
PARAGRAPH = (
    "<p>The harbour bridge reopened to traffic on Monday after two years of repairs, the city's"
    " transport office said, and the ferries that carried commuters in the meantime stop.</p>"
)


def _page(head: str = "", body: str = "", title: str = "") -> str:
    title_element = f"<title>{title}</title>" if title else ""
    return (
        f"<html><head>{title_element}{head}</head>"
        f"<body><nav><a href='/'>Home</a></nav>{body}{PARAGRAPH}</body></html>"
    )


def _lexbor_title(html: str) -> str:
    # As the extraction reports it: on one line, whitespace collapsed.
    return _extract._one_line(page_title(resiliparse_html.HTMLTree.parse(html)))


def _trafilatura_title(html: str) -> str:
    return _extract._title(_extract._parse(html, URL))


CASES = {
    # The last OpenGraph title with content wins over every other source.
    "opengraph": (
        _page(
            '<meta property="og:title" content="First">'
            '<meta property="og:title" content="Bridge reopens">'
            '<meta property="og:title" content="  ">'
            '<meta name="twitter:title" content="Twitter title">',
            "<h1>Heading</h1>",
            "Title - Site",
        ),
        "Bridge reopens",
    ),
    "named meta, markup stripped": (
        _page('<meta name="Twitter:Title" content="<b>Bridge</b> reopens">', "<h1>Heading</h1>"),
        "Bridge reopens",
    ),
    "first named meta": (
        _page(
            '<meta name="dc.title" content="Dublin Core title">'
            '<meta name="title" content="Plain title">'
        ),
        "Dublin Core title",
    ),
    "itemprop headline": (
        _page('<meta itemprop="headline" content="Bridge reopens after repairs">'),
        "Bridge reopens after repairs",
    ),
    "json-ld headline": (
        _page(
            '<script type="application/ld+json">'
            '{"@context": "https://schema.org", "@type": "NewsArticle",'
            ' "headline": "Bridge reopens to traffic"}</script>',
            "<h1>One</h1><h1>Two</h1>",
        ),
        "Bridge reopens to traffic",
    ),
    "the only h1, spaced at blocks": (
        _page(body="<h1>Bridge<div>reopens</div>  to\n traffic</h1>", title="Other - Site"),
        "Bridge reopens to traffic",
    ),
    "headline class over the title": (
        _page(
            body='<h1>One</h1><h1>Two</h1><h2 class="entry-title">Bridge <i>reopens</i></h2>',
            title="Other - Site",
        ),
        "Bridge reopens",
    ),
    "classed title too short": (
        _page(body='<h1>One</h1><h1>Two</h1><h3 class="title">ab</h3>', title="Title - Site"),
        "Title",
    ),
    "title element, part before the separator": (
        _page(body="<h1>One</h1><h1>Two</h1>", title="Bridge reopens | City News"),
        "Bridge reopens",
    ),
    "title element, part without a full stop": (
        _page(title="St. Mary's bridge - City News"),
        "City News",
    ),
    "title element whole": (_page(title="Bridge reopens"), "Bridge reopens"),
    "first non-empty h1": (
        _page(body="<h1> </h1><h1>Bridge</h1>", title="No. 5. Bridge."),
        "Bridge",
    ),
    "first h2 when no h1": (_page(body="<h2>Repairs</h2>", title="No. 5."), "Repairs"),
    "nothing": (_page(), ""),
}


@pytest.mark.parametrize("name", CASES)
def test_each_source_gives_the_title_trafilatura_gives(name: str) -> None:
    html, expected = CASES[name]
    assert _lexbor_title(html) == expected
    assert _trafilatura_title(html) == expected


def test_a_head_cut_short_by_a_noscript_keeps_its_later_metas() -> None:
    # The HTML5 parse ends the head at the pixel's <img> and moves the metas after it to the
    # body; libxml2 keeps them in the head, where the title's search reads them.
    html = (
        "<html><head><title>Site</title><noscript><img src='/pixel.gif'></noscript>"
        '<meta property="og:title" content="Bridge reopens"></head>'
        f"<body><h1>One</h1><h1>Two</h1>{PARAGRAPH}</body></html>"
    )
    tree = resiliparse_html.HTMLTree.parse(html)
    assert tree.head.last_element_child.tag == "noscript"
    assert _lexbor_title(html) == _trafilatura_title(html) == "Bridge reopens"


def test_a_meta_of_the_body_proper_is_no_title() -> None:
    html = _page(
        body='<article><meta itemprop="headline" content="Microdata headline"></article>'
        "<div></div><meta name='title' content='Stray meta'>",
        title="Bridge reopens",
    )
    assert _lexbor_title(html) == _trafilatura_title(html) == "Bridge reopens"


def test_json_ld_that_does_not_parse_is_read_by_pattern() -> None:
    html = _page(
        '<script type="application/ld+json">{"@type": "Article", "headline": "Bridge reopens",'
        " broken</script>",
        "<h1>One</h1><h1>Two</h1>",
    )
    assert _lexbor_title(html) == _trafilatura_title(html) == "Bridge reopens"


def test_the_title_is_one_line() -> None:
    html = _page('<meta property="og:title" content="Bridge\n reopens\r\n\tafter  repairs">')
    assert _lexbor_title(html) == "Bridge reopens after repairs"


def test_deep_nesting_in_a_heading_is_no_error() -> None:
    html = _page(body="<h1>" + "<span>" * 5_000 + "Bridge" + "</span>" * 5_000 + "</h1>")
    assert _lexbor_title(html) == "Bridge"


def test_the_fast_reading_takes_its_metadata_from_the_lexbor_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The lxml parse is the second parse the fast path exists to avoid.
    def no_lxml(html: str, url: str) -> None:
        raise AssertionError("the fast path parsed the page with lxml")

    html = _page(
        '<meta property="og:title" content="Bridge reopens">'
        '<meta property="article:published_time" content="2024-05-06T08:00:00Z">'
        '<meta http-equiv="content-language" content="en">',
        "<article>" + PARAGRAPH * 6 + "</article>",
    )
    monkeypatch.setattr(_extract, "_parse", no_lxml)
    page = _extract.extract_page(html, URL)
    assert page.extractor == _extract.FAST_READER
    assert (page.title, str(page.published_at)) == ("Bridge reopens", "2024-05-06")
    assert page.language_hint == "en"


def test_a_meta_nested_in_the_head_is_no_title() -> None:
    # Only the head's own children are read: a meta a <noscript> holds is not one.
    html = (
        "<html><head><title>Bridge reopens</title>"
        '<noscript><meta property="og:title" content="Noscript title"></noscript>'
        "<link rel='stylesheet' href='/site.css'></head>"
        f"<body>{PARAGRAPH}</body></html>"
    )
    assert _lexbor_title(html) == _trafilatura_title(html) == "Bridge reopens"


def test_a_page_trafilatura_reads_takes_its_metadata_from_the_lexbor_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The fast reading drops the container classed "sidebar", so trafilatura reads the text;
    # the title and date still come from the parse the fast reading made.
    def no_lxml_metadata(tree: object, *rest: object) -> None:
        raise AssertionError("the metadata was read from the lxml tree")

    html = (
        '<html><head><meta property="og:title" content="Bridge reopens">'
        '<meta property="article:published_time" content="2024-05-06"></head>'
        f"<body><div class='sidebar'>{PARAGRAPH * 4}</div></body></html>"
    )
    monkeypatch.setattr(_extract, "_title", no_lxml_metadata)
    monkeypatch.setattr(_extract, "_published", no_lxml_metadata)
    page = _extract.extract_page(html, URL)
    assert page.extractor == "trafilatura"
    assert (page.title, str(page.published_at)) == ("Bridge reopens", "2024-05-06")
    assert "harbour bridge reopened" in page.text


def _too_deep(head: str) -> str:
    # Nested past the fast reading's depth, within libxml2's: only lxml parses it.
    depth = _extract.MAX_FAST_DEPTH + 10
    body = "<div>" * depth + PARAGRAPH * 4 + "</div>" * depth
    return f"<html><head>{head}</head><body>{body}</body></html>"


def test_a_page_too_deep_for_the_fast_reading_takes_its_metadata_from_lxml() -> None:
    page = _extract.extract_page(
        _too_deep('<meta property="og:title" content="Bridge reopens">'), URL
    )
    assert page.extractor == "trafilatura"
    assert page.title == "Bridge reopens"


def test_a_page_refused_on_another_thread_leaves_no_tree_to_free_here() -> None:
    # resiliparse frees a tree only on the thread that parsed it; the refusal's traceback,
    # handled on this thread, must not hold the tree of the page it refused.
    import gc
    import sys
    from concurrent.futures import ThreadPoolExecutor

    html = "<html><body><div class='sidebar'><p>Menu</p></div></body></html>"
    unraisable: list[object] = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with ThreadPoolExecutor(1) as pool:
            error = pool.submit(_extract.extract_page, html, URL).exception()
        assert isinstance(error, _extract.ExtractionFailed)
        del error
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert unraisable == []


@pytest.mark.timeout(60)  # the pattern's rescans would take minutes: a hang, not a slow test
@pytest.mark.parametrize("opening", ["<!--", "<"])
def test_a_meta_title_full_of_unclosed_markup_is_read_in_one_pass(opening: str) -> None:
    # trafilatura strips markup from a meta's content with a pattern that rescans the rest of
    # the value from every "<" nothing closes: 40,000 of them took half a minute.
    content = "Bridge " + opening * 200_000
    html = _page(f'<meta name="title" content="{content}">')
    # Nothing closes either opening, so nothing is cut, as trafilatura's pattern cuts nothing.
    assert _lexbor_title(html) == _extract._one_line(content)


def test_markup_in_a_meta_title_is_cut_as_trafilatura_cuts_it() -> None:
    from trafilatura.utils import HTML_STRIP_TAGS

    from external_query_service.text._page_title import _without_tags

    values = ["a<b>c</b>d", "x<!-- y -->z", "x<!-- y\n -->z>w", "<<a>", "a<!--b", "a<b", ">a<"]
    for value in values:
        assert _without_tags(value) == HTML_STRIP_TAGS.sub("", value)


@pytest.mark.timeout(60)  # trafilatura's rescans of the whole value would take minutes
def test_a_page_only_lxml_parses_reads_a_huge_meta_title_in_time() -> None:
    html = _too_deep('<meta name="title" content="Bridge ' + "<!--" * 200_000 + '">')
    page = _extract.extract_page(html, URL)
    assert page.extractor == "trafilatura"
    assert page.title.startswith("Bridge <!--")
    assert len(page.title) <= _extract.MAX_META_CHARS
