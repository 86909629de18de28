"""The links a captured HTML page shows: ``<a href>`` targets resolved against the page.

Links are data read from the page: they are only listed here. Web tools let a caller
follow one of them, and only when it lies inside the allowed origins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from trafilatura.utils import load_html

from ._origins import OriginSet

__all__ = ["MAX_LINKS", "PageLinks", "observe_links"]

#: Links kept per page; the rest are counted as omitted.
MAX_LINKS = 200
_TEXT_CHARS = 120


@dataclass(frozen=True)
class PageLinks:
    """``links`` are ``(url, anchor text)`` inside the origins, in page order, without
    fragments or duplicates; the counters say what was left out and why."""

    links: tuple[tuple[str, str], ...]
    outside_origins: int = 0
    unsupported: int = 0
    over_limit: int = 0


def _base(tree: Any, page_url: str) -> httpx.URL:
    base = httpx.URL(page_url)
    for element in tree.iter("base"):
        href = element.get("href")
        if isinstance(href, str) and href.strip():
            try:
                return base.join(href.strip())
            except httpx.InvalidURL:
                return base
    return base


def observe_links(
    html: str, page_url: str, origins: OriginSet, *, limit: int = MAX_LINKS
) -> PageLinks:
    """Every ``<a href>`` of ``html``, resolved against ``page_url`` (or ``<base href>``)."""
    try:
        tree = load_html(html) if html.strip() else None
    except Exception:  # lxml raises several types on hostile markup; no links then
        tree = None
    if tree is None:
        return PageLinks(())
    base = _base(tree, page_url)
    found: dict[str, str] = {}
    outside = unsupported = over = 0
    for element in tree.iter("a"):
        href = element.get("href")
        if not isinstance(href, str) or not href.strip():
            continue
        try:
            target = base.join(href.strip()).copy_with(fragment=None)
        except (httpx.InvalidURL, ValueError):
            unsupported += 1
            continue
        if target.scheme not in ("http", "https"):
            unsupported += 1
            continue
        url = str(target)
        if not origins.allows(url):
            outside += 1
            continue
        text = " ".join(str(element.text_content()).split())[:_TEXT_CHARS]
        if url in found:
            found[url] = found[url] or text
            continue
        if len(found) >= limit:
            over += 1
            continue
        found[url] = text
    return PageLinks(tuple(found.items()), outside, unsupported, over)
