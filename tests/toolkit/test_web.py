"""Web tools: bounded to the caller's origins, following only observed links, on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from external_query_service._digests import sha256_digest
from external_query_service._evidence_store import EvidenceStore
from external_query_service.errors import UnsafeURL
from external_query_service.net._fetch import SafeFetcher
from external_query_service.settings import NetworkSettings
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.toolkit import BoundaryRefused, BudgetExhausted, WebBudget, WebTools
from tests.support.world import article

T = TypeVar("T")
SITES = ("docs.test", "other.test")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def network() -> NetworkSettings:
    return NetworkSettings(
        allowed_networks=("127.0.0.1/32",),  # type: ignore[arg-type]
        resolve=dict.fromkeys(SITES, "127.0.0.1"),
        timeout_s=5.0,
    )


def url(server: LoopbackServer, site: str, path: str) -> str:
    return f"http://{site}:{server.port}{path}"


def origin(server: LoopbackServer, site: str = "docs.test") -> str:
    return f"http://{site}:{server.port}"


def hub(server: LoopbackServer) -> str:
    """A link hub: too little text for main-text extraction, links of every kind."""
    return f"""<html><head><title>Docs</title></head><body><nav>
<a href="/guide">Guide</a> <a href="/guide#install">Install</a>
<a href="{url(server, "docs.test", "/faq")}">FAQ</a>
<a href="{url(server, "other.test", "/elsewhere")}">Elsewhere</a>
<a href="mailto:team@docs.test">Mail</a> <a href="javascript:void(0)">Nothing</a>
</nav></body></html>"""


GUIDE = article(
    "安装指南",
    [
        "本项目需要 Python 3.11 或更高版本，安装前请先创建虚拟环境，并升级 pip 到最新版本。",
        "安装命令为 pip install example，安装完成后运行 example --version 检查版本号是否正确。",
        "如果安装失败，请查看常见问题页面，其中列出了代理设置和证书问题的解决办法。",
    ],
)


@pytest.fixture
def site(loopback: LoopbackServer) -> LoopbackServer:
    loopback.route("/", Reply(body=hub(loopback)), host="docs.test")
    loopback.route("/guide", Reply(body=GUIDE), host="docs.test")
    loopback.route("/faq", Reply(body=GUIDE.replace("安装指南", "常见问题")), host="docs.test")
    loopback.route("/secret", Reply(body=GUIDE), host="docs.test")
    loopback.route("/elsewhere", Reply(body=GUIDE), host="other.test")
    loopback.route(
        "/away", Reply(302, headers={"Location": url(loopback, "other.test", "/elsewhere")})
    )
    loopback.route("/moved", Reply(301, headers={"Location": "/guide"}), host="docs.test")
    return loopback


def tools(server: LoopbackServer, **budget: int) -> WebTools:
    return WebTools.from_network(
        network(), EvidenceStore(), [origin(server)], budget=WebBudget(**budget)
    )


def test_opening_the_entry_captures_its_text_and_lists_only_links_inside_the_origins(
    site: LoopbackServer,
) -> None:
    web = tools(site)
    page = run(web.open(url(site, "docs.test", "/")))

    assert page.text_basis == "visible_text"  # a hub has no main text, its links still count
    assert [link.url for link in web.links(page.ref)] == [
        url(site, "docs.test", "/guide"),
        url(site, "docs.test", "/faq"),
    ]
    assert [link.link_id for link in web.links(page.ref)] == ["L1", "L2"]
    assert (page.links_outside_origins, page.links_unsupported) == (1, 2)
    assert page.digest == sha256_digest(web._store.read(page.ref, 0, page.length))


def test_following_an_observed_link_captures_the_page_with_its_main_text(
    site: LoopbackServer,
) -> None:
    web = tools(site)
    run(web.open(url(site, "docs.test", "/")))
    page = run(web.follow("L1"))

    assert page.final_url == url(site, "docs.test", "/guide")
    assert page.text_basis == "main_text"
    assert "Python 3.11" in web._store.read(page.ref)
    assert web.link("L1").captured_ref == page.ref


def test_a_link_that_was_never_observed_is_refused_without_a_request(
    site: LoopbackServer,
) -> None:
    web = tools(site)
    run(web.open(url(site, "docs.test", "/")))
    with pytest.raises(BoundaryRefused) as caught:
        run(web.follow(url(site, "docs.test", "/secret")))
    assert caught.value.reason == "link_not_observed"
    with pytest.raises(BoundaryRefused):
        run(web.follow("L99"))
    assert site.requests_to("/secret") == []


def test_an_entry_outside_the_origins_is_refused_without_a_request(
    site: LoopbackServer,
) -> None:
    web = tools(site)
    with pytest.raises(BoundaryRefused) as caught:
        run(web.open(url(site, "other.test", "/elsewhere")))
    assert caught.value.reason == "origin_not_allowed"
    # The same host on another port is another origin.
    with pytest.raises(BoundaryRefused):
        run(web.open(f"http://docs.test:{site.port + 1}/guide"))
    assert site.requests_to("/elsewhere") == []


def test_a_redirect_leaving_the_origins_is_refused_before_the_hop_is_requested(
    site: LoopbackServer,
) -> None:
    web = tools(site)
    with pytest.raises(BoundaryRefused) as caught:
        run(web.open(url(site, "docs.test", "/away")))
    assert caught.value.reason == "origin_not_allowed"
    assert "other.test" in caught.value.detail
    assert len(site.requests_to("/away", host="docs.test")) == 1
    assert site.requests_to("/elsewhere", host="other.test") == []
    assert web.pages() == ()


def test_a_redirect_inside_the_origins_is_followed_and_recorded(site: LoopbackServer) -> None:
    web = tools(site)
    page = run(web.open(url(site, "docs.test", "/moved")))
    assert page.redirects == (url(site, "docs.test", "/guide"),)
    assert page.final_url == url(site, "docs.test", "/guide")


def test_reading_a_section_returns_the_passage_exactly_as_stored(site: LoopbackServer) -> None:
    web = tools(site)
    page = run(web.open(url(site, "docs.test", "/guide")))
    store = web._store
    for passage in store.passage_options(page.ref):
        section = web.read_section(passage.passage_id)
        assert section.text == store.quote(page.ref, passage.offset, passage.length)
        assert section.source == page.final_url
    other = store.put("不是网页工具采集的文本" * 10, source="elsewhere")
    with pytest.raises(BoundaryRefused) as caught:
        web.read_section(f"{other}#p0")
    assert caught.value.reason == "unknown_page"


def test_the_page_budget_stops_further_fetches(site: LoopbackServer) -> None:
    web = tools(site, max_pages=1)
    run(web.open(url(site, "docs.test", "/")))
    with pytest.raises(BudgetExhausted) as caught:
        run(web.follow("L1"))
    assert caught.value.reason == "page_budget"
    assert site.requests_to("/guide") == []
    assert web.usage.pages == 1


def test_the_byte_budget_counts_bodies_received(site: LoopbackServer) -> None:
    web = tools(site, max_bytes=100)
    first = run(web.open(url(site, "docs.test", "/")))
    assert web.usage.bytes == len(hub(site).encode("utf-8")) > 100
    with pytest.raises(BudgetExhausted) as caught:
        run(web.follow("L1"))
    assert caught.value.reason == "byte_budget"
    assert first.ref


def test_the_fetcher_asks_the_caller_about_each_redirect_hop(site: LoopbackServer) -> None:
    asked: list[str] = []

    def refuse(hop: str) -> bool:
        asked.append(hop)
        return False

    fetcher = SafeFetcher(network())
    with pytest.raises(UnsafeURL, match="refused by the caller"):
        run(fetcher.fetch(url(site, "docs.test", "/moved"), allow_redirect=refuse))
    assert asked == [url(site, "docs.test", "/guide")]
    assert site.requests_to("/guide") == []
