"""A loopback world for end-to-end tests: SearXNG, Open-Meteo, Frankfurter and web pages
under their own site names, all on one 127.0.0.1 server with the network guard on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from external_query_service.settings import Settings
from external_query_service.testing import LoopbackServer, RecordedRequest, Reply, json_reply

SEARX = "/searx"
GEO = "/geo/v1"
FORECAST = "/om/v1"
FX = "/fx/v1"


def article(
    title: str,
    paragraphs: Iterable[str],
    *,
    published: str | None = None,
    charset_meta: bool = True,
    site_name: str = "示例新闻网",
) -> str:
    """A boilerplate-heavy article page: nav, cookie banner, sidebar, footer around the text."""
    meta = '<meta charset="utf-8">' if charset_meta else ""
    date_meta = (
        f'<meta property="article:published_time" content="{published}">' if published else ""
    )
    byline = f'<p class="byline">发布时间：{published}</p>' if published else ""
    body = "\n".join(f"<p>{text}</p>" for text in paragraphs)
    nav = "".join(f'<li><a href="/c/{n}">栏目{n}</a></li>' for n in range(12))
    related = "".join(f'<li><a href="/r/{n}">相关阅读：热门话题第{n}期</a></li>' for n in range(8))
    return f"""<!DOCTYPE html>
<html lang="zh-CN"><head>{meta}<title>{title} - {site_name}</title>{date_meta}</head>
<body>
<div class="cookie-banner">本站使用 Cookie 以改善体验。<button>接受</button></div>
<header><div class="logo">{site_name}</div><nav><ul>{nav}</ul></nav></header>
<main><article>
<h1>{title}</h1>
{byline}
{body}
</article></main>
<aside><h3>相关阅读</h3><ul>{related}</ul></aside>
<footer><p>版权所有 © {site_name} 保留所有权利</p><p>联系我们 | 广告服务 | 隐私政策</p></footer>
</body></html>"""


def hit(url: str, title: str, content: str, published: str | None = None) -> dict[str, Any]:
    return {
        "url": url,
        "title": title,
        "content": content,
        "engine": "bing",
        "engines": ["bing"],
        "score": 1.0,
        "category": "general",
        "publishedDate": published,
    }


@dataclass
class World:
    """One server, many names. Register pages and search results, then ``settings()``."""

    server: LoopbackServer
    sites: set[str] = field(default_factory=set)
    search: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    default_results: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.server.route(f"{SEARX}/search", self._search)
        self.server.route(f"{SEARX}/config", json_reply({"instance_name": "loopback"}))

    # -- pages --------------------------------------------------------------------------
    def page(
        self,
        site: str,
        path: str,
        body: str | bytes,
        *,
        content_type: str = "text/html; charset=utf-8",
        status: int = 200,
    ) -> str:
        """Serve ``body`` at ``http://<site>:<port><path>``; returns that URL."""
        self.sites.add(site)
        self.server.route(
            path, Reply(status=status, body=body, content_type=content_type), host=site
        )
        return self.url(site, path)

    def url(self, site: str, path: str) -> str:
        return f"http://{site}:{self.server.port}{path}"

    # -- search ---------------------------------------------------------------------------
    def results(self, query: str, hits: list[dict[str, Any]]) -> None:
        self.search[query] = hits

    def _search(self, request: RecordedRequest) -> Reply:
        query = request.query.get("q", [""])[0]
        if not query:
            return json_reply({"error": "No query"}, status=400)
        found = self.search.get(query, self.default_results)
        return json_reply(
            {
                "query": query,
                "results": found,
                "answers": [],
                "corrections": [],
                "infoboxes": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )

    # -- fact APIs ----------------------------------------------------------------------
    def geocoding(self, handler: Callable[[RecordedRequest], Reply]) -> None:
        self.server.route(f"{GEO}/search", handler)

    def forecast(self, handler: Callable[[RecordedRequest], Reply]) -> None:
        self.server.route(f"{FORECAST}/forecast", handler)

    def fx(self, path: str, reply: Reply) -> None:
        self.server.route(f"{FX}/{path}", reply)

    # -- settings -----------------------------------------------------------------------
    def base(self, prefix: str) -> str:
        return f"http://127.0.0.1:{self.server.port}{prefix}"

    def settings(self, *adapters: dict[str, Any], **sections: dict[str, Any]) -> Settings:
        network = {
            "allowed_networks": ["127.0.0.1/32"],
            "resolve": dict.fromkeys(sorted(self.sites), "127.0.0.1"),
            "timeout_s": 5.0,
            "deadline_s": 10.0,
        }
        network.update(sections.pop("network", {}))
        return Settings.from_mapping(
            {"network": network, "adapters": list(adapters), **sections}, origin="world"
        )

    def searxng(self, adapter_id: str = "searx", *, base_url: str | None = None) -> dict[str, Any]:
        return {"kind": "searxng", "id": adapter_id, "base_url": base_url or self.base(SEARX)}

    def open_meteo(self) -> dict[str, Any]:
        return {
            "kind": "open_meteo",
            "id": "weather",
            "base_url": self.base(FORECAST),
            "geocoding_url": self.base(GEO),
        }

    def frankfurter(self) -> dict[str, Any]:
        return {"kind": "frankfurter", "id": "fx", "base_url": self.base(FX)}
