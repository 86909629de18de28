"""Answers rendered by a real CommonMark renderer (markdown-it-py) hold only the elements
the templates mean: paragraphs, lists and links to the admitted sources over http(s).

Outside text (titles, URLs, snippets, site names, placeholders) renders as the text it
is, whatever it spells: an image, a ``javascript:`` link, emphasis or an autolink.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

import pytest

from external_query_service.models import AnswerContract
from external_query_service.presenter._extractive import ExtractivePresenter
from external_query_service.testing import LoopbackServer
from tests.support.packets import make_evidence, make_packet
from tests.support.world import World, article, hit, make_service

# The renderer (markdown-it-py) is a dev dependency, no extra: every test here renders with it.
MarkdownIt = pytest.importorskip("markdown_it").MarkdownIt

#: The two payloads: a title ending ``![b`` with a path closing it into an image, and a
#: title ``[Click`` with a path closing it into a ``javascript:`` link.
IMAGE = ("港口报告 ![b", "https://site1.example/a)](http://beacon.example/t.gif)")
SCRIPT = ("[Click", "https://site1.example/x)](javascript:alert(1))")
#: What the templates write: paragraphs, lists, links to sources, and a non-web URL as code.
INTENDED = frozenset({"p", "ol", "ul", "li", "a", "code"})


class _Elements(HTMLParser):
    """Every element and attribute of an HTML fragment, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def rendered(markdown: str) -> _Elements:
    # The commonmark preset lets raw HTML through: the strictest host a reader may have.
    parser = _Elements()
    parser.feed(MarkdownIt("commonmark").render(markdown))
    return parser


def assert_only_intended(markdown: str, urls: set[str]) -> _Elements:
    """The render has intended elements only, each link an http(s) one to ``urls``."""
    page = rendered(markdown)
    for tag, attrs in page.tags:
        assert tag in INTENDED, f"<{tag}> rendered from {markdown!r}"
        if tag == "a":
            assert set(attrs) == {"href"}
            href = attrs["href"] or ""
            assert href.startswith(("http://", "https://")), href
            assert unquote(href) in {unquote(url) for url in urls}, href
    return page


CONTRACTS = ["direct_fact", "summary_with_sources", "compare_with_sources"]


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize("payload", [IMAGE, SCRIPT], ids=["image", "javascript"])
def test_a_title_and_path_that_close_a_link_render_as_text(
    payload: tuple[str, str], contract: AnswerContract
) -> None:
    title, url = payload
    item = make_evidence(1, title=title, url=url, snippet="湛江 港口 吞吐量 2.6亿吨")
    packet = make_packet((item,), contract=contract, compare_targets=("湛江",))
    text = ExtractivePresenter().present(packet).text

    page = assert_only_intended(text, {url})
    shown = "".join(page.text)
    assert title in shown  # the title reads as written
    hrefs = [attrs["href"] or "" for tag, attrs in page.tags if tag == "a"]
    # One link, the source's own: its host, not the beacon's or a script's.
    assert [urlsplit(href).hostname for href in hrefs] == ["site1.example"]


def test_markdown_in_snippets_titles_and_sites_stays_text() -> None:
    hostile = (
        "**bold** _em_ `code` ~~gone~~ | cell | <https://evil.example/a> "
        "[ok](javascript://site1.example/%0Aalert(1)) ![i](https://site1.example/i.png) "
        "[kept](https://site1.example/more)"
    )
    item = make_evidence(
        1, snippet=hostile, title="*t* `x`", site="s_1_.example", url="https://site1.example/p"
    )
    text = ExtractivePresenter().present(make_packet((item,))).text

    page = assert_only_intended(text, {item.url, "https://site1.example/more"})
    links = [attrs["href"] for tag, attrs in page.tags if tag == "a"]
    # The admitted http link is kept; the javascript: one naming the admitted host is not.
    assert "https://site1.example/more" in links
    assert not any("javascript" in (href or "") for href in links)
    shown = "".join(page.text)
    for literal in ("**bold**", "_em_", "`code`", "~~gone~~", "*t* `x`", "s_1_.example"):
        assert literal in shown


def test_a_url_that_is_not_http_is_shown_as_text_not_as_a_link() -> None:
    item = make_evidence(1, url="file:///srv/docs/a_(1)`](javascript:x).md")
    text = ExtractivePresenter().present(make_packet((item,))).text

    page = assert_only_intended(text, set())
    assert "file:///srv/docs/a_(1)%60](javascript:x).md" in "".join(page.text)
    assert [tag for tag, _attrs in page.tags if tag in ("a", "code")] == ["code"]


def test_the_link_placeholder_follows_the_answer_language() -> None:
    snippet = "Port volume rose, see https://evil.example/x for more"
    item = make_evidence(1, snippet=snippet, title="Port report")
    english = make_packet((item,), question="What is the port's volume this year?")
    text = ExtractivePresenter(language="en").present(english).text

    assert "链接已移除" not in text
    assert "[link removed]" in "".join(rendered(text).text)
    chinese = ExtractivePresenter(language="zh").present(make_packet((item,))).text
    assert "[链接已移除]" in "".join(rendered(chinese).text)


def test_the_payloads_through_the_whole_chain_render_without_an_image_or_script(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    question = "湛江港今年吞吐量是多少？"
    urls = {
        world.page(
            "port-x.test",
            "/a)](http://beacon.example/t.gif)",
            article(
                "湛江港吞吐量报告 ![b",
                ["湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八。"],
            ),
        ),
        world.page(
            "port-y.test",
            "/x)](javascript:alert(1))",
            article(
                "[Click",
                ["湛江港吞吐量数据以本文为准，今年前十个月吞吐量2.6亿吨，集装箱航线持续加密。"],
            ),
        ),
    }
    world.results(question, [hit(url, "湛江港", "吞吐量") for url in sorted(urls)])
    with make_service(world, world.searxng()) as service:
        answer = service.answer(question, {"entities": ["湛江港"]})

    assert answer.status == "answered"
    assert {item.url for item in answer.evidence} == urls  # both pages were quoted
    page = assert_only_intended(answer.text, urls)
    html = MarkdownIt("commonmark").render(answer.text)
    assert "<img" not in html
    hrefs = [attrs["href"] or "" for tag, attrs in page.tags if tag == "a"]
    assert sorted(urlsplit(href).hostname for href in hrefs) == ["port-x.test", "port-y.test"]
    assert all(href.startswith("http://") for href in hrefs)
