"""Decoded HTML → the page's main text, title and publication date.

The main text comes from trafilatura on the *decoded* string (it would otherwise guess the
encoding itself and garble undeclared GBK pages). Comments are dropped, tables kept, links
not rendered. Metadata is read from the same parsed tree with two cheap steps — trafilatura's
title heuristics and htmldate without its extensive search — because trafilatura's full
``with_metadata`` pass (author, sitename, categories, extensive date search) costs about half
as much again as the extraction itself.

The returned text is ``normalize_text``-ed; that is the text the evidence store keeps and
that snippets point into.

trafilatura and htmldate (about 0.2 s of imports) are imported by the functions that use
them, when the first page is extracted: a process that answers from fact APIs only, or
prints ``--help``, never loads them.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from dataclasses import dataclass
from datetime import date
from typing import Any, Final

from ..errors import ExtractionFailed
from .tokens import query_terms, terms

__all__ = [
    "CJK_WEIGHT",
    "MIN_QUERY_SENTENCE_WEIGHTED",
    "MIN_SENTENCE_WEIGHTED",
    "MIN_WEIGHTED_CHARS",
    "ExtractedPage",
    "cjk_count",
    "extract_page",
    "is_too_short",
    "normalize_text",
    "preload_extraction",
]

#: A page's text is too short when ``len(text) + CJK_WEIGHT * cjk_chars < MIN_WEIGHTED_CHARS``,
#: i.e. fewer than 200 characters of Latin text or 40 CJK characters (a CJK character carries
#: about as much as five Latin ones), mixed text in proportion. Nav-only pages come out of
#: trafilatura as junk like "Home\nAbout" or "We use cookies. Accept"; this rejects them.
MIN_WEIGHTED_CHARS: Final = 200
CJK_WEIGHT: Final = 4
#: A shorter text is still a document when it holds a complete sentence (ended by 。！？!? or
#: a full stop) of at least this weight: 12 CJK characters or 60 Latin ones. "We use
#: cookies." is no such sentence; "湛江明天多云转晴，最高气温24℃。" is.
MIN_SENTENCE_WEIGHTED: Final = 60
#: ... or a complete sentence of at least this weight (4 CJK characters, 20 Latin ones) that
#: names one of the question's terms: a short documentation page, "Requests time out after 10
#: seconds.", answers a question about timeouts, however little else it says.
MIN_QUERY_SENTENCE_WEIGHTED: Final = 20
# A sentence: a line's text up to and including its terminator (no terminator, no sentence).
_SENTENCE = re.compile(r"[^\n。！？!?]*?(?:[。！？!?]|\.(?=\s|$))")

_PLAIN_TYPES: Final = frozenset({"text/plain", "text/markdown"})

# Line breaks of every flavour become "\n"; other control characters go.
_NEWLINES = re.compile(r"\r\n?|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f]")
_SPACES = re.compile(r"[^\S\n]+")
_CJK = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff]"
)
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")
_KANA = re.compile("[\u3040-\u30ff]")
_HANGUL = re.compile("[\uac00-\ud7af]")
_LETTER_SAMPLE: Final = 4000
_CONTENT_LANGUAGE: Final = (
    '//meta[translate(@http-equiv, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")'
    '="content-language"]/@content'
)
_LANG_TAG = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{1,8}){0,4}")


@dataclass(frozen=True)
class ExtractedPage:
    """Main text (normalized), title ("" when none), publication date and a language hint."""

    text: str
    title: str
    published_at: date | None
    language_hint: str | None


def normalize_text(text: str) -> str:
    """NFC; newlines unified; control characters dropped; whitespace runs inside a line
    collapsed to one space; lines stripped; empty lines dropped; lines joined by "\\n".

    Not NFKC: the text must stay what a reader would quote (full-width punctuation stays).
    """
    text = _NEWLINES.sub("\n", unicodedata.normalize("NFC", text))
    text = _CONTROLS.sub("", text)
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def cjk_count(text: str) -> int:
    """How many CJK characters (Han, kana, Hangul) ``text`` holds."""
    return len(_CJK.findall(text))


def _weighted(text: str) -> int:
    return len(text) + CJK_WEIGHT * cjk_count(text)


def is_too_short(text: str, query: str = "") -> bool:
    """True when ``text`` is below the CJK-aware length floor (see ``MIN_WEIGHTED_CHARS``)
    and holds no complete sentence either (``MIN_SENTENCE_WEIGHTED``), nor a shorter one
    naming a term of ``query`` (``MIN_QUERY_SENTENCE_WEIGHTED``): a news brief of one or two
    sentences and a short documentation page that answers are documents, a page of menu
    items and a cookie notice are not. Emptiness is judged by what the text says, not by
    its length alone."""
    if _weighted(text) >= MIN_WEIGHTED_CHARS:
        return False
    wanted = frozenset(query_terms(query)) if query else frozenset()
    for found in _SENTENCE.finditer(text):
        sentence = found.group().strip()
        weight = _weighted(sentence)
        if weight >= MIN_SENTENCE_WEIGHTED:
            return False
        if (
            wanted
            and weight >= MIN_QUERY_SENTENCE_WEIGHTED
            and not wanted.isdisjoint(terms(sentence))
        ):
            return False
    return True


def preload_extraction() -> None:
    """Load what trafilatura would otherwise load while extracting the first page: jusText's
    stoplists (every language's, merged; about 0.15 s). Idempotent, no I/O beyond the
    installed package's data files."""
    from trafilatura import external as trafilatura_external

    if not trafilatura_external.JT_STOPLIST:
        trafilatura_external.jt_stoplist_init()


def extract_page(
    html: str, url: str, *, content_type: str = "text/html", query: str = ""
) -> ExtractedPage:
    """Extract the main text of a decoded page.

    ``text/plain`` (and markdown) is only normalized. Raises ``ExtractionFailed`` with reason
    ``parser_error`` (not parseable as HTML), ``no_main_text`` (nothing extracted) or
    ``too_short`` (below the CJK-aware floor, ``is_too_short``: a short text that names a term
    of ``query`` in a complete sentence is kept).
    """
    if content_type.split(";", 1)[0].strip().lower() in _PLAIN_TYPES:
        text = _checked(normalize_text(html), url, query)
        return ExtractedPage(text, "", None, _script_language(text))
    if not html.strip():
        raise ExtractionFailed(url, reason="no_main_text")
    if "\x00" in html:
        # NUL never occurs in real markup: a binary body (or UTF-16 without a BOM).
        raise ExtractionFailed(url, reason="parser_error")
    tree = _parse(html, url)
    from trafilatura import bare_extraction

    try:
        # ``bare_extraction`` copies a tree it is given, so ``tree`` stays intact for metadata.
        # The fallbacks stay on (not ``fast``): on the page corpus ``fast`` saves a fifth of
        # the CPU but costs a point of token F1 on the magic_html set. Their one cold cost,
        # jusText's stoplists on the first page that needs them, is ``preload_extraction``'s.
        document = bare_extraction(
            tree,
            url=url,
            include_comments=False,
            include_tables=True,
            include_links=False,
            include_images=False,
        )
    except Exception as exc:
        raise ExtractionFailed(url, reason="parser_error") from exc
    raw = getattr(document, "text", None) if document is not None else None
    if not isinstance(raw, str):
        raise ExtractionFailed(url, reason="no_main_text")
    text = _checked(normalize_text(raw), url, query)
    return ExtractedPage(
        text=text,
        title=_title(tree),
        published_at=_published(tree, url),
        language_hint=_declared_language(tree) or _script_language(text),
    )


def _parse(html: str, url: str) -> Any:
    from trafilatura.utils import load_html

    try:
        tree = load_html(html)
        if tree is None:
            # trafilatura refuses documents without "html" near the start that parse to a
            # single element, e.g. old pages that open with a <script>; browsers render them.
            tree = load_html(f"<html>{html}</html>")
    except Exception as exc:  # lxml raises a handful of types on hostile markup
        raise ExtractionFailed(url, reason="parser_error") from exc
    if tree is None:
        raise ExtractionFailed(url, reason="parser_error")
    return tree


def _checked(text: str, url: str, query: str) -> str:
    if not text:
        raise ExtractionFailed(url, reason="no_main_text")
    if is_too_short(text, query):
        raise ExtractionFailed(url, reason="too_short")
    return text


def _title(tree: Any) -> str:
    # trafilatura's own order: OpenGraph/meta, then JSON-LD, then <h1>/<title> heuristics.
    from trafilatura.metadata import examine_meta, extract_meta_json, extract_title

    try:
        metadata = examine_meta(tree)
        # trafilatura guards this call the same way (malformed JSON-LD).
        with contextlib.suppress(Exception):
            metadata = extract_meta_json(tree, metadata)
        title = metadata.title or extract_title(tree) or ""
    except Exception:
        return ""
    return " ".join(normalize_text(str(title)).split("\n"))


def _published(tree: Any, url: str) -> date | None:
    # Extensive search scans every text node for date-like strings: one corpus page took
    # 1.7 s with it. Meta tags, JSON-LD, <time> elements and the URL are enough here.
    from htmldate import find_date

    try:
        found = find_date(
            tree,
            url=url or None,
            extensive_search=False,
            original_date=True,
            outputformat="%Y-%m-%d",
        )
        return date.fromisoformat(found) if found else None
    except Exception:
        return None


def _declared_language(tree: Any) -> str | None:
    candidates = [tree.get("lang"), tree.get("xml:lang")]
    candidates += tree.xpath(_CONTENT_LANGUAGE)[:1]
    for value in candidates:
        if isinstance(value, str):
            tag = value.strip().lower().replace("_", "-")
            if _LANG_TAG.fullmatch(tag):
                return tag
    return None


def _script_language(text: str) -> str | None:
    """A hint from the writing system alone: "ja" (kana), "ko" (Hangul), "zh" (Han), else None."""
    sample = text[:_LETTER_SAMPLE]
    letters = sum(1 for char in sample if char.isalpha())
    if not letters:
        return None
    if len(_KANA.findall(sample)) * 10 >= letters:
        return "ja"
    if len(_HANGUL.findall(sample)) * 3 >= letters:
        return "ko"
    if len(_HAN.findall(sample)) * 3 >= letters:
        return "zh"
    return None
