"""Lines of a page's main text that are navigation: they never lead or fill an excerpt.

On a short page the extractor keeps the menus with the text ("示例新闻网 / 栏目0 / … / 栏目11 /
标题 / 正文"), and a snippet would then open with a dozen menu items. ``navigation_filter``
builds, from the page's markup, the test ``chunk_text`` uses to leave such lines out:

- a *link line*: the line is the text of one of the page's links (``<a>…</a>``), or every
  whitespace-separated piece of it is (a menu flattened onto one line);
- a *trail*: three or more items joined by ``>``, ``»`` or ``|`` ("首页 > 新闻 > 标题",
  "联系我们 | 广告服务 | 隐私政策"), at most ``TRAIL_CHARS`` characters.

A line of prose that merely contains a link keeps its place: only lines that are nothing but
link text go. One linear scan of the markup (``_ANCHOR``), then a set lookup per line.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Final

__all__ = ["TRAIL_CHARS", "is_trail", "link_texts", "navigation_filter"]

#: The longest line that can be a trail of links rather than a sentence.
TRAIL_CHARS: Final = 80
_TRAIL_ITEMS: Final = 3
#: A link whose text holds no further markup; longer link texts are sentences, not menus.
_ANCHOR = re.compile(r"<a\b[^>]{0,2000}>([^<]{1,80})</a>", re.IGNORECASE)
_SEPARATORS = re.compile(r"[>»|]")


def _clean(text: str) -> str:
    return " ".join(html.unescape(text).split())


def link_texts(markup: str) -> frozenset[str]:
    """The texts of the links in ``markup`` whose text is plain (whitespace collapsed)."""
    # Menus repeat their links page after page: each distinct raw text is cleaned once.
    return frozenset(filter(None, map(_clean, set(_ANCHOR.findall(markup)))))


def is_trail(line: str) -> bool:
    """True for a short line of three or more items joined by ``>``, ``»`` or ``|``."""
    if len(line) > TRAIL_CHARS or not _SEPARATORS.search(line):
        return False
    items = [item for item in _SEPARATORS.split(line) if item.strip(" -")]
    return len(items) >= _TRAIL_ITEMS


def navigation_filter(markup: str) -> Callable[[str], bool]:
    """The ``skip_line`` test for ``chunk_text`` on the text extracted from ``markup``."""
    links = link_texts(markup)

    def navigation(line: str) -> bool:
        if is_trail(line):
            return True
        if not links:
            return False
        cleaned = " ".join(line.split())
        return cleaned in links or all(piece in links for piece in cleaned.split(" "))

    return navigation
