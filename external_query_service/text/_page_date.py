"""A page's publication date read from the lexbor parse the fast reading made.

htmldate finds the date on an lxml tree; parsing the page a second time for it costs about as
much as the fast reading's whole extraction. ``page_date`` walks htmldate's fast search (no
extensive text search, the original date rather than the last update) over the lexbor tree
instead, stage for stage and in the same order:

1. the URL (the page's canonical link where no URL is given);
2. the ``<meta>`` elements (name, property, itemprop, pubdate and http-equiv cues), then
   JSON-LD ``"datePublished"``-style keys;
3. ``<abbr>`` elements (Facebook's ``data-utime``, ``published`` classes);
4. with htmldate's list of media and embedded elements removed: elements whose id, class or
   itemprop names a date (bylines, footers, ``<small>``), then ``<title>`` and ``<h1>``, then
   ``<time>`` elements;
5. a full timestamp anywhere in the markup, the ``og:image`` URL, author-written dates
   ("March 5, 2021", "5. März 2021");
6. last, a bare ISO date in the page's text (scripts and styles left out).

Each stage's strings are judged by htmldate's own string-level functions (its date grammar,
plausibility bounds and candidate choice), so only the walk over the tree is this module's.
Element lookups are lexbor's CSS selectors, run in C: of the elements htmldate tests one by
one in Python, only those whose attributes hold a cue reach Python here.

The two parsers build the same tree from well-formed markup; on malformed markup they may
differ (libxml2 and the HTML5 algorithm repair it differently), and so may the dates. The
walk removes elements from the tree: it is the last reader of it.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Final

from ._lexbor import JSON_SCRIPTS, JSON_TYPES, DOMNode, own_text, select_all

if TYPE_CHECKING:
    from resiliparse.parse.html import HTMLTree

__all__ = ["page_date"]

_FORMAT: Final = "%Y-%m-%d"
# htmldate's stage-4 candidates: these tags with a cue in the first of their id and class
# attributes, or in itemprop (``_is_candidate``), and every <footer> and <small>.
_CANDIDATE_TAGS: Final = ("div", "h2", "h3", "h4", "li", "p", "span", "time", "ul")
# The elements the stage after the candidates reads.
_TITLES: Final = frozenset({"h1", "title"})
_ALWAYS_TAGS: Final = frozenset({"footer", "small"})
# Substrings one of which every candidate's id, class or itemprop holds: a superset of the
# cues ``_is_candidate`` tests, so that lexbor hands Python only the elements worth testing.
_DATE_CUES: Final = ("date", "Date", "datum", "Datum")
_ID_CLASS_CUES: Final = ("meta", "Meta", "time", "publish", "footer")
_CLASS_ONLY_CUES: Final = (
    "info",
    "post_detail",
    "block-content",
    "byline",
    "subline",
    "posted",
    "submitted",
    "created-post",
    "publication",
    "author",
    "autor",
    "field-content",
    "fa-clock-o",
    "fa-calendar",
    "fecha",
    "parution",
)
_ID_CLASS_PATTERN = re.compile("[Mm]eta|time|publish|footer")
_CLASS_PATTERN = re.compile("|".join(_CLASS_ONLY_CUES))
# The elements of htmldate's second and third stages: the metas, the scripts that may hold
# JSON-LD, and the <abbr>s.
_HEAD_SELECTOR: Final = f"meta[content], meta[datetime], abbr, {JSON_SCRIPTS}"
# Archive.org's banner, which htmldate leaves out of the search.
_DISCARDED: Final = 'div[id="wm-ipp-base"], div[id="wm-ipp"]'
# A tag as lexbor serializes it: it escapes "<" and ">" in attribute values as in text, so a
# tag holds neither. Stopping at the next "<" keeps the scan linear where a raw-text element
# (``<plaintext>``, ``<xmp>``) holds a run of "<" without a ">".
_TAGS = re.compile(r"<[^<>]*>")


def page_date(tree: HTMLTree, url: str | None) -> date | None:
    """The page's publication date, or None when no stage finds a plausible one. Never raises
    on odd markup (a date is a hint, not a requirement); removes elements from ``tree``."""
    try:
        found = _find(tree, url or None)
    except Exception:
        return None
    return date.fromisoformat(found) if found else None


def _find(tree: HTMLTree, url: str | None) -> str | None:
    from htmldate.core import TIMESTAMP_LOOSE_PATTERN, TIMESTAMP_PATTERN
    from htmldate.extractors import extract_url_date, idiosyncrasies_search, pattern_search

    document = tree.document
    if document is None:
        return None
    options = _options()
    if url is None:
        url = next(
            (
                link.getattr("href")
                for link in select_all(document, "link[rel]")
                if link.getattr("rel") == "canonical"
            ),
            None,
        )
    found = extract_url_date(url, options)
    if found is not None:
        return found
    # Each walk over the tree is one selector list, its elements in document order, sorted
    # to their stages by tag: a walk costs as much as the page is large, a lookup of the few
    # elements found does not.
    metas, scripts, abbrs = _by_tag(
        select_all(document, _HEAD_SELECTOR), ("meta", "script", "abbr")
    )
    found = _header(metas, options) or _json(scripts, options) or _abbr(abbrs, options)
    if found is not None:
        return found
    _remove(document, _removed_selector())
    nodes = select_all(document, _body_selector())
    found = (
        _first_text_date([node for node in nodes if _is_candidate(node)], options)
        or _first_text_date([node for node in nodes if node.tag in _TITLES], options)
        or _time([node for node in nodes if node.tag == "time"], options)
    )
    if found is not None:
        return found
    # The markup as the lxml tree htmldate searches would serialize it: without comments,
    # which that parse drops (a CMS's comment often stamps when the page was generated).
    markup = _without_comments(document.html)
    found = pattern_search(markup, TIMESTAMP_PATTERN, options) or _image(document, options)
    found = found or idiosyncrasies_search(markup, options)
    if found is not None:
        return found
    # htmldate's last resort: a bare ISO date in the text, scripts and styles left out, the
    # text nodes joined by spaces (a tag stands for the space between two of them).
    text = _TAGS.sub(" ", _without_elements(markup, ("script", "style")))
    return pattern_search(_unescaped(text), TIMESTAMP_LOOSE_PATTERN, options)


@functools.cache
def _day_options(today: date) -> Any:
    from htmldate.utils import Extractor
    from htmldate.validators import get_max_date, get_min_date

    return Extractor(False, get_max_date(None), get_min_date(None), True, _FORMAT)


def _options() -> Any:
    # htmldate's bounds: its earliest plausible date, and the end of today. One options
    # object a day, as htmldate's own caches expect.
    return _day_options(date.today())


def _by_tag(nodes: list[DOMNode], tags: tuple[str, ...]) -> list[list[DOMNode]]:
    """``nodes`` split by tag, one list for each of ``tags``, each in the order given."""
    lists: dict[str, list[DOMNode]] = {tag: [] for tag in tags}
    for node in nodes:
        lists[node.tag].append(node)
    return [lists[tag] for tag in tags]


@functools.cache
def _removed_selector() -> str:
    from htmldate.settings import CLEANING_LIST

    return ", ".join([*CLEANING_LIST, _DISCARDED])


def _remove(document: DOMNode, selector: str) -> None:
    # Last to first: an element nested in another one removed is removed before it, never
    # after (its node would be gone).
    for node in reversed(select_all(document, selector)):
        node.decompose()


def _plausible(nodes: list[DOMNode]) -> bool:
    from htmldate.settings import MAX_POSSIBLE_CANDIDATES

    return 0 < len(nodes) <= MAX_POSSIBLE_CANDIDATES


def _header(metas: list[DOMNode], options: Any) -> str | None:
    from htmldate.core import (
        DATE_ATTRIBUTES,
        ITEMPROP_ATTRS,
        ITEMPROP_ATTRS_ORIGINAL,
        NAME_MODIFIED,
        PROPERTY_MODIFIED,
    )
    from htmldate.extractors import extract_url_date, try_date_expr_opts
    from htmldate.validators import is_valid_date

    found: str | None = None
    reserve: str | None = None
    for meta in metas:
        content = meta.getattr("content")
        if meta.hasattr("name"):
            name = (meta.getattr("name") or "").lower()
            if name == "og:url":
                reserve = extract_url_date(content, options) or reserve
            elif name in DATE_ATTRIBUTES:
                found = try_date_expr_opts(content, options)
            elif name in NAME_MODIFIED:
                reserve = try_date_expr_opts(content, options) or reserve
        elif meta.hasattr("property"):
            prop = (meta.getattr("property") or "").lower()
            if prop in DATE_ATTRIBUTES or prop in PROPERTY_MODIFIED:
                attempt = try_date_expr_opts(content, options)
                if attempt is not None:
                    if prop in DATE_ATTRIBUTES:
                        found = attempt
                    else:
                        reserve = attempt
        elif meta.hasattr("itemprop"):
            itemprop = (meta.getattr("itemprop") or "").lower()
            if itemprop in ITEMPROP_ATTRS:
                attempt = try_date_expr_opts(meta.getattr("datetime") or content, options)
                if attempt is not None and itemprop in ITEMPROP_ATTRS_ORIGINAL:
                    found = attempt
            elif itemprop == "copyrightyear" and content is not None:
                first_day = f"{content}-01-01"
                if is_valid_date(first_day, _FORMAT, earliest=options.min, latest=options.max):
                    reserve = datetime(int(first_day[:4]), 1, 1).strftime(_FORMAT)
        elif meta.hasattr("pubdate"):
            if (meta.getattr("pubdate") or "").lower() == "pubdate":
                found = try_date_expr_opts(content, options)
        elif meta.hasattr("http-equiv"):
            equiv = (meta.getattr("http-equiv") or "").lower()
            if equiv in ("date", "last-modified"):
                attempt = try_date_expr_opts(content, options)
                if equiv == "date":
                    found = attempt
                else:
                    reserve = attempt or reserve
        if found is not None:
            return found
    return reserve


def _json(scripts: list[DOMNode], options: Any) -> str | None:
    from htmldate.extractors import JSON_PUBLISHED, pattern_search

    for script in scripts:
        if script.getattr("type") not in JSON_TYPES:
            continue
        text = own_text(script)
        if not text or '"date' not in text:
            continue
        found = pattern_search(text, JSON_PUBLISHED, options)
        if found is not None:
            return found
    return None


def _abbr(elements: list[DOMNode], options: Any) -> str | None:
    from htmldate.core import CLASS_ATTRS, compare_reference
    from htmldate.extractors import try_date_expr_opts
    from htmldate.validators import check_extracted_reference, update_reference

    if not _plausible(elements):
        return None
    reference: datetime | None = None
    for abbr in elements:
        if abbr.hasattr("data-utime"):
            try:
                stamp = datetime.fromtimestamp(int(abbr.getattr("data-utime") or ""), tz=UTC)
            except (OSError, OverflowError, ValueError):
                continue
            reference = update_reference(reference, stamp, True)
        elif abbr.getattr("class") in CLASS_ATTRS:
            title = abbr.getattr("title")
            own = own_text(abbr)
            if title is not None:
                found = try_date_expr_opts(title, options)
                if found is not None:
                    return found
            elif own and len(own) > 10:
                reference = compare_reference(reference, own, options)
    return check_extracted_reference(reference, options) or _first_text_date(elements, options)


@functools.cache
def _body_selector() -> str:
    """The elements of htmldate's fourth stage: the candidates (a superset, which
    ``_is_candidate`` sorts out), the title and <h1>s, and the <time> elements."""
    tags = ", ".join(_CANDIDATE_TAGS)
    cues = [f'[id*="{cue}"]' for cue in (*_DATE_CUES, *_ID_CLASS_CUES)]
    cues += [f'[class*="{cue}"]' for cue in (*_DATE_CUES, *_ID_CLASS_CUES, *_CLASS_ONLY_CUES)]
    cues += [f'[itemprop*="{cue}"]' for cue in _DATE_CUES]
    candidates = f"{', '.join(sorted(_ALWAYS_TAGS))}, :is({tags}):is({', '.join(cues)})"
    return f"{candidates}, {', '.join(sorted(_TITLES))}, time"


def _is_candidate(node: DOMNode) -> bool:
    """htmldate's test: a <footer> or <small>, or an element of its candidate tags with a date
    cue in the first of id and class (in the order the markup gives them) or in itemprop; a
    meta, time, publish or footer cue in that first one; a byline-like cue in the class; or
    MediaWiki's last-modified footer id."""
    tag = node.tag
    if tag in _ALWAYS_TAGS:
        return True
    if tag not in _CANDIDATE_TAGS:
        return False
    first = next((node.getattr(name) for name in node.attrs if name in ("id", "class")), None)
    for cue in (first, node.getattr("itemprop")):
        if cue is not None:
            folded = cue.replace("D", "d")
            if "date" in folded or "datum" in folded:
                return True
    if first is None:
        return False
    if _ID_CLASS_PATTERN.search(first):
        return True
    classes = node.getattr("class")
    if classes is not None and _CLASS_PATTERN.search(classes):
        return True
    ids = node.getattr("id")
    return ids is not None and "footer-info-lastmod" in ids


def _first_text_date(nodes: list[DOMNode], options: Any) -> str | None:
    """The first date in the text, then the title attribute, of each node in turn (none when
    the nodes are none or implausibly many)."""
    from htmldate.core import examine_text

    if not _plausible(nodes):
        return None
    for node in nodes:
        for text in (node.text, node.getattr("title") or ""):
            found = examine_text(text, options)
            if found:
                return str(found)
    return None


def _time(elements: list[DOMNode], options: Any) -> str | None:
    from htmldate.core import compare_reference
    from htmldate.extractors import try_date_expr_opts
    from htmldate.validators import check_extracted_reference

    if not _plausible(elements):
        return None
    reference: datetime | None = None
    for element in elements:
        stamp = element.getattr("datetime") or ""
        if len(stamp) > 6:
            classes = element.getattr("class") or ""
            if element.getattr("pubdate") == "pubdate" or classes.startswith(
                ("entry-date", "entry-time")
            ):
                found = try_date_expr_opts(stamp, options)
                if found is not None:
                    return found
            else:
                reference = compare_reference(reference, stamp, options)
        elif (own := own_text(element)) is not None and len(own) > 6:
            reference = compare_reference(reference, own, options)
    return check_extracted_reference(reference, options)


def _image(document: DOMNode, options: Any) -> str | None:
    from htmldate.extractors import extract_url_date

    image = next(
        (
            meta
            for meta in select_all(document, 'meta[property="og:image"][content]')
            if meta.getattr("property") == "og:image"
        ),
        None,
    )
    return extract_url_date(image.getattr("content"), options) if image is not None else None


def _without_comments(markup: str) -> str:
    """``markup`` without its comments, as the lxml parse htmldate reads drops them: each
    ``<!--`` to the first ``-->`` after it (a serialized comment cannot hold one). One search
    per comment; a ``<!--`` with no ``-->`` after it (raw text, say ``<plaintext>``'s) ends
    the search, as no later one could be closed either."""
    parts: list[str] = []
    done = 0
    start = markup.find("<!--")
    while start != -1 and (end := markup.find("-->", start + 4)) != -1:
        parts.append(markup[done:start])
        done = end + 3
        start = markup.find("<!--", done)
    parts.append(markup[done:])
    return "".join(parts)


def _without_elements(markup: str, names: tuple[str, ...]) -> str:
    """``markup`` without its elements named ``names``: from each start tag to the first end
    tag of its name after it. lexbor writes a script's or a style's content raw, and it
    cannot hold its own end tag, so this leaves what removing the elements from the tree and
    serializing the rest gives. The earliest start tag of any of the names is cut first (a
    style's text may spell ``<script``); one search per element, and a name whose end tag
    never follows is looked for no more, so a raw-text run of start tags costs no rescans."""
    openings = {name: markup.find(f"<{name}") for name in names}
    parts: list[str] = []
    done = 0
    while openings:
        name, start = min(openings.items(), key=lambda item: item[1])
        if start == -1:
            del openings[name]
            continue
        after = start + 1 + len(name)
        if after < len(markup) and _continues_name(markup[after]):  # "<scripts": no match
            openings[name] = markup.find(f"<{name}", after)
            continue
        tag_end = markup.find(">", after)
        end = markup.find(f"</{name}>", tag_end + 1) if tag_end != -1 else -1
        if end == -1:
            del openings[name]
            continue
        parts.append(markup[done:start])
        done = end + len(name) + 3
        # A name's next start tag stands where it was found unless that was inside the cut.
        openings = {
            other: at if at >= done else markup.find(f"<{other}", done)
            for other, at in openings.items()
        }
    parts.append(markup[done:])
    return "".join(parts)


def _continues_name(char: str) -> bool:
    # A character that would make the tag name longer (a regular expression's ``\w``).
    return char.isalnum() or char == "_"


def _unescaped(text: str) -> str:
    # The serializer escapes "&", "<", ">" and no-break spaces in text; the date patterns
    # hold none of them, but an escape must not join two runs of digits either.
    return (
        text.replace("&nbsp;", "\xa0")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
    )
