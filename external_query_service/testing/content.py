"""Content for hand-made worlds: realistic article pages and SearXNG results."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["article", "hit", "searx_body"]


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
