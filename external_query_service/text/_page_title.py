"""A page's title read from the lexbor parse the fast reading made.

trafilatura finds the title on an lxml tree; parsing the page a second time for it costs about
as much CPU as the title's whole search several times over. ``page_title`` walks trafilatura's
title heuristics over the lexbor tree instead, source for source and in the same order:

1. the ``<meta>`` elements of ``<head>``: the last non-blank OpenGraph ``og:title``, else the
   first title-like ``name`` (``title``, ``twitter:title``, ``dc.title``, ...) or ``itemprop``
   ``headline`` of a meta without a ``property``, its markup stripped;
2. where they give none, JSON-LD (``application/ld+json`` and ``application/settings+json``
   scripts): an article's ``headline`` (its ``name`` for a plain ``Article``), or, from JSON
   that does not parse, the same keys found by trafilatura's regular expressions;
3. the only ``<h1>``, when there is exactly one;
4. the first heading whose class, id or itemprop names a title or headline (three lists,
   each tried whole before the next), its text between 3 and 199 characters;
5. the ``<title>`` of ``<head>``: its part before the last separator ("Article - Site"), its
   part after, or the whole, the first of them without a full stop;
6. the first non-empty ``<h1>``, else the first ``<h2>``, else the whole ``<title>``.

The strings are judged by trafilatura's own string-level helpers (its name lists, markup and
JSON clean-ups, the JSON-LD reader, the separator pattern), so only the walk over the tree is
this module's. Element lookups are lexbor's CSS selectors, run in C; Python sees the head's
meta elements, the scripts, and the few headings that are candidates. A heading's text is
spaced the way trafilatura spaces it: at block elements for an ``<h1>`` or ``<h2>`` taken
whole, at every element for a heading matched by its class.

The two parsers build the same tree from well-formed markup; on malformed markup they may
differ (libxml2 and the HTML5 algorithm repair it differently), and so may the titles. The
tree is only read.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from ._lexbor import JSON_SCRIPTS, JSON_TYPES, own_text, select_all

if TYPE_CHECKING:
    from collections.abc import Collection

    from resiliparse.parse.html import ElementNode, HTMLTree, Node

__all__ = ["page_title"]

# trafilatura's title lists, one CSS selector for the three: every element any of them may
# hold, each then sorted to its list by ``_title_lists``. Its first list tests the class with
# a regular expression whose every match holds "title" or "headline".
_CLASSED_TITLES: Final = (
    ':is(h1, h2, h3):is([class*="title"], [id*="title"], [class*="headline"],'
    ' [id*="headline"], [itemprop*="headline"]),'
    ' [class="entry-title"], [class="post-title"]'
)
# The elements a head holds, and those a noscript of the head may hold (what the HTML5 parse
# moves from such a head to the body).
_HEAD_OR_NOSCRIPT: Final = frozenset(
    {"base", "iframe", "img", "link", "meta", "noscript", "script", "style", "template", "title"}
)
_HEADLINE_CLASS = re.compile("(?:post-|entry-|article-|post__)title|headline")
_EXACT_CLASSES: Final = frozenset({"entry-title", "post-title"})
# A classed title's text is taken between these lengths, bounds excluded.
_MIN_CLASSED: Final = 2
_MAX_CLASSED: Final = 200


def page_title(tree: HTMLTree) -> str:
    """The page's title as its source gives it, whitespace and markup left for the caller to
    normalize ("" when no source gives one). Never raises on odd markup: a title is a label,
    not a requirement."""
    try:
        return str(_find(tree))
    except Exception:
        return ""


def _find(tree: HTMLTree) -> Any:
    # Not always a string: JSON-LD may give a list or an object, which trafilatura keeps.
    document = tree.document
    if document is None:
        return ""
    head = tree.head
    title = _meta_title(head, tree.body) if head is not None else None
    return title or _json_title(document) or _heading_title(document, head) or ""


def _meta_title(head: ElementNode, body: ElementNode | None) -> str | None:
    """trafilatura's ``examine_meta`` title: the last ``og:title`` with a non-blank content,
    else the first meta naming a title. Only the head's own children count (``head/meta``)."""
    from trafilatura.metadata import METANAME_TITLE

    opengraph: str | None = None
    named: str | None = None
    for meta in _head_metas(head, body):
        content = meta.getattr("content")
        if content is None:
            continue
        prop = meta.getattr("property")
        if prop is not None:
            # OpenGraph's value is taken as written; another property never names the title.
            if prop == "og:title" and content and not content.isspace():
                opengraph = content
            continue
        if named is not None:
            continue
        stripped = _without_tags(content).strip()
        if not stripped:
            continue
        name = meta.getattr("name")
        if name is not None:
            if name.lower() in METANAME_TITLE:
                named = stripped
        elif (meta.getattr("itemprop") or "").lower() == "headline":
            named = stripped
    return opengraph or named


def _without_tags(value: str) -> str:
    """trafilatura's ``HTML_STRIP_TAGS.sub("", value)``: each comment (``<!--`` to the first
    ``-->`` on its line) or else tag (``<`` to the first ``>``) cut, left to right. Its
    pattern rescans the rest of the value from every ``<`` that nothing closes (an attribute of
    a few hundred kilobytes of them takes minutes); here each next ``-->``, newline and ``>``
    is found once and reused until it is passed."""
    if "<" not in value:
        return value
    parts: list[str] = []
    done = 0
    # The next "-->", newline and ">" at or after where they were last looked for (-1: none
    # after it; -2: not looked for yet).
    comment_end = newline = tag_end = -2
    at = value.find("<")
    while at != -1:
        if value.startswith("<!--", at):
            if comment_end != -1 and comment_end < at + 4:
                comment_end = value.find("-->", at + 4)
            if newline != -1 and newline < at + 4:
                newline = value.find("\n", at + 4)
            if comment_end != -1 and (newline == -1 or comment_end < newline):
                parts.append(value[done:at])
                done = comment_end + 3
                at = value.find("<", done)
                continue
        if tag_end != -1 and tag_end <= at:
            tag_end = value.find(">", at + 1)
        if tag_end == -1:  # nothing closes a tag, nor a comment, from here on
            break
        parts.append(value[done:at])
        done = tag_end + 1
        at = value.find("<", done)
    parts.append(value[done:])
    return "".join(parts)


def _head_metas(head: ElementNode, body: ElementNode | None) -> list[ElementNode]:
    """The metas libxml2 puts in the head. The HTML5 parse ends the head at an element a
    ``<noscript>`` of the head holds (a tracking pixel's ``<img>``), leaving the noscript
    empty and moving the head's later elements to the body; libxml2 keeps the noscript's
    content in it and the rest in the head, up to the first element of the body proper."""
    metas = [meta for meta in select_all(head, "meta") if meta.parent == head]
    last = head.last_element_child
    if body is None or last is None or last.tag != "noscript":
        return metas
    node = body.first_element_child
    while node is not None and node.tag in _HEAD_OR_NOSCRIPT:
        if node.tag == "meta":
            metas.append(node)
        node = node.next_element_sibling
    return metas


def _json_title(document: Any) -> Any:
    """trafilatura's ``extract_meta_json`` title. Its reader fills a metadata record in place
    and the first error (a JSON-LD shape it does not expect) ends the reading, keeping what
    the scripts before gave, as trafilatura's caller does."""
    import json

    from trafilatura.json_metadata import extract_json, extract_json_parse_error, normalize_json
    from trafilatura.metadata import JSON_MINIFY
    from trafilatura.settings import Document

    metadata = Document()
    try:
        for script in select_all(document, JSON_SCRIPTS):
            if script.getattr("type") not in JSON_TYPES:
                continue
            text = own_text(script)
            if not text:
                continue
            element_text = normalize_json(JSON_MINIFY.sub(r"\1", text))
            try:
                schema = json.loads(element_text, strict=False)
                metadata = extract_json(schema, metadata)
            except json.JSONDecodeError:
                metadata = extract_json_parse_error(element_text, metadata)
    except Exception:
        pass
    return metadata.title


def _heading_title(document: Any, head: ElementNode | None) -> str | None:
    """trafilatura's ``extract_title``: headings and the ``<title>`` element."""
    from trafilatura.baseline import _BLOCK_ELEMS
    from trafilatura.metadata import HTMLTITLE_REGEX
    from trafilatura.utils import trim

    h1s = select_all(document, "h1")
    if len(h1s) == 1 and (title := _text(h1s[0], _BLOCK_ELEMS)):
        return title
    for candidates in _title_lists(select_all(document, _CLASSED_TITLES)):
        for node in candidates:
            content = _text(node, None)
            if _MIN_CLASSED < len(content) < _MAX_CLASSED:
                return content
    element = head.query_selector("title") if head is not None else None
    title = trim(element.text or "") if element is not None else ""
    if found := HTMLTITLE_REGEX.match(title):
        for part in (found[1], found[2]):
            if part and "." not in part:
                return str(part)
    if title and "." not in title:
        return title
    # trafilatura's fallbacks reassign the <title>'s text as they go: an empty <h1> or
    # <h2> replaces it with "", and the whole <title> is left only without either.
    for h1 in h1s:
        if title := _text(h1, _BLOCK_ELEMS):
            return title
    h2 = document.query_selector("h2")
    if h2 is not None:
        title = _text(h2, _BLOCK_ELEMS)
    return title or None


def _title_lists(nodes: list[ElementNode]) -> list[list[ElementNode]]:
    """``nodes`` sorted to trafilatura's three title lists, each in document order: headline
    h1/h2, an exact ``entry-title``/``post-title`` class, title-named h1/h2/h3."""
    headline: list[ElementNode] = []
    exact: list[ElementNode] = []
    titled: list[ElementNode] = []
    for node in nodes:
        tag = node.tag
        classes = node.getattr("class")
        ids = node.getattr("id") or ""
        if tag in ("h1", "h2") and (
            (classes is not None and _HEADLINE_CLASS.search(classes))
            or "headline" in ids
            or "headline" in (node.getattr("itemprop") or "")
        ):
            headline.append(node)
        if classes in _EXACT_CLASSES:
            exact.append(node)
        if tag in ("h1", "h2", "h3") and ("title" in (classes or "") or "title" in ids):
            titled.append(node)
    return [headline, exact, titled]


def _text(root: ElementNode, blocks: Collection[str] | None) -> str:
    """The element's text with its whitespace collapsed, as trafilatura reads it: a space at
    the edges of every element in ``blocks`` (``block_text``, which also drops unprintable
    characters from those elements' own text), or of every element when ``blocks`` is None
    (``itertext`` joined by spaces). The walk is iterative: a deep nesting is no error."""
    from resiliparse.parse.html import NodeType
    from trafilatura.utils import remove_control_characters

    parts: list[str] = []
    # Whether the text run at hand belongs to a block element (its own text, or the text
    # after it, up to the next element): the runs trafilatura cleans.
    clean = blocks is not None
    node: Node | None = root.first_child
    # Where to resume once an element's children are read, and whether it was an edge.
    pending: list[tuple[Node | None, bool]] = []
    while True:
        while node is None:
            if not pending:
                return " ".join("".join(parts).split())
            node, edge = pending.pop()
            if edge:
                parts.append(" ")
            clean = blocks is not None and edge
        kind = node.type
        if kind == NodeType.TEXT:
            text = node.text or ""
            parts.append(remove_control_characters(text) if clean else text)
            node = node.next_sibling
        elif kind == NodeType.ELEMENT:
            edge = blocks is None or node.tag in blocks
            if edge:
                parts.append(" ")
            pending.append((node.next_sibling, edge))
            clean = blocks is not None and edge
            node = node.first_child
        else:
            node = node.next_sibling
