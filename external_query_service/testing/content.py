"""Content for hand-made worlds: realistic article pages, pages that are costly to analyse,
and search answers in SearXNG's, Brave's and Tavily's formats (built from the same ``hit()``
results)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["article", "brave_body", "hit", "markup_bombs", "searx_body", "tavily_body"]


def article(
    title: str,
    paragraphs: Iterable[str],
    *,
    published: str | None = None,
    charset_meta: bool = True,
    site_name: str = "示例新闻网",
    lang: str = "zh-CN",
) -> str:
    """A boilerplate-heavy article page: nav, cookie banner, sidebar and footer around the
    text, the way real news pages look to the extractor."""
    meta = '<meta charset="utf-8">' if charset_meta else ""
    date_meta = (
        f'<meta property="article:published_time" content="{published}">' if published else ""
    )
    byline = f'<p class="byline">发布时间：{published}</p>' if published else ""
    body = "\n".join(f"<p>{html.escape(text, quote=False)}</p>" for text in paragraphs)
    nav = "".join(f'<li><a href="/c/{n}">栏目{n}</a></li>' for n in range(12))
    related = "".join(f'<li><a href="/r/{n}">相关阅读：热门话题第{n}期</a></li>' for n in range(8))
    return f"""<!DOCTYPE html>
<html lang="{lang}"><head>{meta}<title>{title} - {site_name}</title>{date_meta}</head>
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


def markup_bombs(title: str = "湛江港吞吐量") -> dict[str, str]:
    """Four pages whose markup makes analysis costly (name → HTML, 0.3 to 0.7 MB each): a
    10,000-row table, one tag with 60,000 attributes, 30,000 levels of nesting, 12,000 links.
    Analysed, the table and the links take seconds of CPU and the attributes over a minute;
    each is over the page walk's markup budget."""

    def page(inner: str) -> str:
        return f"<html><head><title>{html.escape(title)}</title></head><body>{inner}</body></html>"

    cells = "".join(f"<tr><td>{i}</td><td>湛江</td><td>港口</td></tr>" for i in range(10_000))
    attributes = " ".join(f'a{i}="v"' for i in range(60_000))
    links = "".join(f'<p><a href="/n{i}">湛江港新闻{i}</a></p>' for i in range(12_000))
    return {
        "table": page(f"<table>{cells}</table>"),
        "attributes": page(f"<div {attributes}>湛江港</div>"),
        "nested": page("<div>" * 30_000 + "湛江港" + "</div>" * 30_000),
        "links": page(links),
    }


def hit(url: str, title: str, content: str, published: str | None = None) -> dict[str, Any]:
    """One SearXNG result: an item of its JSON API's ``results`` array."""
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


def searx_body(query: str, results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A whole SearXNG JSON answer for ``query``."""
    return {
        "query": query,
        "results": list(results),
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [],
    }


def brave_body(query: str, results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A Brave Web Search answer for ``query``: ``web.results[]`` with ``title``, ``url``,
    ``description`` and, for dated hits, ``page_age``."""
    items = []
    for result in results:
        item = {"title": result["title"], "url": result["url"], "description": result["content"]}
        if result.get("publishedDate"):
            item["page_age"] = f"{result['publishedDate']}T00:00:00"
        items.append(item)
    return {
        "type": "search",
        "query": {"original": query},
        "web": {"type": "search", "results": items},
    }


def tavily_body(
    query: str, results: Sequence[dict[str, Any]], *, raw: Sequence[str | None] = ()
) -> dict[str, Any]:
    """A Tavily search answer for ``query``: ``results[]`` with ``title``, ``url``,
    ``content``, ``score`` and, when given (``raw``, by position), ``raw_content``."""
    items = []
    for position, result in enumerate(results):
        item: dict[str, Any] = {
            "title": result["title"],
            "url": result["url"],
            "content": result["content"],
            "score": round(0.9 - 0.1 * position, 2),
        }
        if result.get("publishedDate"):
            item["published_date"] = result["publishedDate"]
        if position < len(raw) and raw[position] is not None:
            item["raw_content"] = raw[position]
        items.append(item)
    return {"query": query, "results": items, "response_time": 0.5}
