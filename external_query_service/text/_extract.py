"""Decoded HTML → the page's main text, title and publication date.

Two readings of the main text, both on the *decoded* string (an extractor would otherwise
guess the encoding itself and garble undeclared GBK pages):

- the *fast reading*, first: resiliparse's main-content heuristics (``extract_plain_text``
  with ``main_content``) on its own lexbor parse, about a fifteenth of trafilatura's CPU on
  the page corpus, with as high a body recall (it keeps more boilerplate, which the chunk
  filter and the ranker's link-text feature leave out of snippets);
- trafilatura, where the fast text looks wrong: below the length floor (``is_too_short``), or
  less than ``MIN_MAIN_SHARE`` of the page's whole visible text while the rest of the page
  names the question's terms that the fast text lacks (``MAX_MISSED_QUERY_SHARE``: the
  heuristics kept one block of a forum thread, an article split across containers, or the
  wrong block, which trafilatura's readability and jusText fallbacks find). A small share
  alone is most often a short article among long menus, comments and related links, which
  the fast text holds whole; without a question, the share alone decides. Comments are
  dropped, tables kept, links not rendered. Where resiliparse is not installed (no binary
  wheel for the platform), trafilatura reads every page.

The title, language and publication date come from the lexbor tree the fast reading parsed,
whichever reading gives the text: ``page_title`` and ``page_date`` walk trafilatura's title
heuristics and htmldate's date search over it (a second, lxml, parse of every page cost as
much CPU as the fast reading's extraction). Only where the fast reading has no tree (the page
nests too deep, lexbor fails, resiliparse is not installed) are they read from trafilatura's
lxml parse, with the same two libraries: trafilatura's title heuristics and htmldate without
its extensive search, not trafilatura's full ``with_metadata`` pass (author, sitename,
categories, extensive date search), which costs about half as much again as the extraction
itself. The lxml parse is the one trafilatura's ``load_html`` makes, less its scan of the
whole page for the characters libxml2 refuses (a regex over every character, a quarter of the
parse's cost), which here is a C search per character and a removal only where one occurs.

The returned text is ``normalize_text``-ed; that is the text the evidence store keeps and
that snippets point into.

trafilatura, htmldate and resiliparse (about 0.2 s of imports) are imported by the functions
that use them, when the first page is extracted: a process that answers from fact APIs only,
or prints ``--help``, never loads them.
"""

from __future__ import annotations

import contextlib
import functools
import re
import unicodedata
from dataclasses import dataclass
from datetime import date
from typing import Any, Final

from ..errors import ExtractionFailed
from ._echo import fold
from ._page_date import page_date
from ._page_title import page_title
from ._tokens import query_terms, terms

__all__ = [
    "CJK_WEIGHT",
    "FAST_READER",
    "MAX_FAST_DEPTH",
    "MAX_META_CHARS",
    "MAX_MISSED_QUERY_SHARE",
    "MIN_MAIN_SHARE",
    "MIN_QUERY_SENTENCE_WEIGHTED",
    "MIN_SENTENCE_WEIGHTED",
    "MIN_WEIGHTED_CHARS",
    "NOT_TOLD",
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

#: The fast reading's text is taken when it is at least this share (in characters) of all the
#: text the page shows. Below it, the main-content heuristics may have kept a fragment (one
#: post of a thread, the lead of an article split across containers), or the page is a short
#: article among long menus, comments and related links: ``MAX_MISSED_QUERY_SHARE`` tells
#: the two apart.
MIN_MAIN_SHARE: Final = 0.3
#: A fast text below ``MIN_MAIN_SHARE`` is still taken unless the rest of the page names at
#: least this share of the question's distinct terms (``tokens.query_terms``) that the fast
#: text lacks (substring tests on the folded texts, as ``echo`` tests terms): a fragment
#: that holds what the page says of the question is the passage the question needs. On the
#: page corpus (the page title as the question) this sends 5 of 249 pages to trafilatura
#: instead of 41 and keeps body recall at or above ``trafilatura.extract``'s on every set
#: (``bench/page_cpu.py``). Without a question the share alone decides. Only what the page
#: tells counts as naming a term: text outside links and navigation menus (``NOT_TOLD``), so
#: a site's name in its menus and links does not send an article whose title names the site
#: to trafilatura.
MAX_MISSED_QUERY_SHARE: Final = 0.3
#: The elements whose text the page points with rather than tells: links and navigation
#: menus. (A banner's or footer's own text, a site's name in its logo, is still told: on a
#: short article it may be all that says what kind of page it is.)
NOT_TOLD: Final = ("a", "nav", "[role=navigation]")
#: The fast reading is not tried on a page whose markup nests this deep: its main-content
#: heuristics take time growing with the cube of the depth (0.1 s at 2,500 levels, 3 s at
#: 10,000), a CPU bomb, while trafilatura's parser (libxml2) stops nesting at 256 levels.
#: Real pages stay far below it.
MAX_FAST_DEPTH: Final = 128
#: A meta's content is read up to this many characters where trafilatura reads the title.
MAX_META_CHARS: Final = 2_000
#: ``ExtractedPage.extractor`` of a page the fast reading gave the text of.
FAST_READER: Final = "resiliparse"
_TRAFILATURA: Final = "trafilatura"

_PLAIN_TYPES: Final = frozenset({"text/plain", "text/markdown"})

# Line breaks of every flavour become "\n"; other control characters go.
_NEWLINES = re.compile(r"\r\n?|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f]")
_OTHER_NEWLINE = re.compile(r"[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_CJK_RUN = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff]+"
)
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")
_KANA = re.compile("[\u3040-\u30ff]")
_HANGUL = re.compile("[\uac00-\ud7af]")
_LETTER_SAMPLE: Final = 4000
_LANG_TAG = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{1,8}){0,4}")


@dataclass(frozen=True)
class ExtractedPage:
    """Main text (normalized), title ("" when none), publication date, a language hint, and
    which reading gave the text (``FAST_READER``, ``"trafilatura"``, or ``"plain"`` for a
    text/plain body)."""

    text: str
    title: str
    published_at: date | None
    language_hint: str | None
    extractor: str = _TRAFILATURA


def normalize_text(text: str) -> str:
    """NFC; newlines unified; control characters dropped; whitespace runs inside a line
    collapsed to one space; lines stripped; empty lines dropped; lines joined by "\\n".

    Not NFKC: the text must stay what a reader would quote (full-width punctuation stays).
    """
    text = unicodedata.normalize("NFC", text)
    if _OTHER_NEWLINE.search(text):  # one scan of a plain class: most texts hold none
        text = _NEWLINES.sub("\n", text)
    text = _CONTROLS.sub("", text)
    # ``split()`` cuts at the whitespace runs (``\s``, which str and re agree on) and drops
    # the ends: a line's runs collapsed and the line stripped, at a fifth of a regex's cost.
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def cjk_count(text: str) -> int:
    """How many CJK characters (Han, kana, Hangul) ``text`` holds: the lengths of its CJK runs
    added up, so no list of single characters is built."""
    if text.isascii():
        return 0
    return sum(map(len, _CJK_RUN.findall(text)))


def _weighted(text: str) -> int:
    return len(text) + CJK_WEIGHT * cjk_count(text)


def is_too_short(text: str, query: str = "") -> bool:
    """True when ``text`` is below the CJK-aware length floor (see ``MIN_WEIGHTED_CHARS``)
    and holds no complete sentence either (``MIN_SENTENCE_WEIGHTED``), nor a shorter one
    naming a term of ``query`` (``MIN_QUERY_SENTENCE_WEIGHTED``): a news brief of one or two
    sentences and a short documentation page that answers are documents, a page of menu
    items and a cookie notice are not. Emptiness is judged by what the text says, not by
    its length alone."""
    # The length alone settles a long text: its CJK characters need no count.
    if len(text) >= MIN_WEIGHTED_CHARS or _weighted(text) >= MIN_WEIGHTED_CHARS:
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
    """Load what the first page's extraction would otherwise load: jusText's stoplists (every
    language's, merged; about 0.15 s) and the fast reading's module. Idempotent, no I/O beyond the
    installed package's data files."""
    from trafilatura import external as trafilatura_external

    if not trafilatura_external.JT_STOPLIST:
        trafilatura_external.jt_stoplist_init()
    with contextlib.suppress(ImportError):  # the fast reading, where it is installed
        import resiliparse.extract.html2text  # noqa: F401


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
        return ExtractedPage(text, "", None, _script_language(text), extractor="plain")
    if not html.strip():
        raise ExtractionFailed(url, reason="no_main_text")
    if "\x00" in html:
        # NUL never occurs in real markup: a binary body (or UTF-16 without a BOM).
        raise ExtractionFailed(url, reason="parser_error")
    fast_text, lexbor = _fast_reading(html, query)
    if lexbor is None:
        tree = _parse(html, url)
        text = _trafilatura_text(tree, url, query)
        return ExtractedPage(
            text=text,
            title=_title(tree),
            published_at=_published(tree, url),
            language_hint=_declared_language(tree) or _script_language(text),
            extractor=_TRAFILATURA,
        )
    title = _one_line(page_title(lexbor))
    declared = _lexbor_language(lexbor)
    published = page_date(lexbor, url)  # last: the date's search removes elements
    # resiliparse frees a tree only on the thread that parsed it, and an exception raised
    # below keeps this frame, and with it the tree, alive wherever it is handled.
    del lexbor
    if fast_text is None:
        text, extractor = _trafilatura_text(_parse(html, url), url, query), _TRAFILATURA
    else:
        text, extractor = fast_text, FAST_READER
    return ExtractedPage(
        text=text,
        title=title,
        language_hint=declared or _script_language(text),
        published_at=published,
        extractor=extractor,
    )


def _fast_reading(html: str, query: str) -> tuple[str | None, Any]:
    """The fast reading's main text (normalized) and the lexbor tree it was read from. The
    text is None where it looks wrong (module docstring); both are None where the page nests
    deeper than ``MAX_FAST_DEPTH``, lexbor cannot parse it, or resiliparse is not installed
    (the page's metadata is then read from trafilatura's parse)."""
    try:
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree
    except ImportError:
        return None, None
    try:
        tree = HTMLTree.parse(html)
        document = tree.document
        deep = _depth_selector(MAX_FAST_DEPTH)
        if document is None or document.query_selector(deep) is not None:
            return None, None
        options: dict[str, Any] = {"alt_texts": False, "list_bullets": False, "comments": False}
        raw = extract_plain_text(tree, main_content=True, **options)
        main = normalize_text(raw)
        if not main or is_too_short(main, query):
            return None, tree
        # The page's whole text is never longer than its markup (each character of it is one
        # of the markup's, or a break standing for a tag of several): a main text this long
        # has its share without the whole text extracted, as most articles' have.
        if len(raw) >= MIN_MAIN_SHARE * len(html):
            return main, tree
        # A text lacking too few of the question's terms for the rest of the page to name
        # enough of them is taken whatever its share: the whole text is not extracted.
        wanted, lacking = _lacking_terms(main, query)
        if query and not _misses(wanted, lacking, None):
            return main, tree
        # Both raw texts come out of one extractor with its whitespace collapsed alike, so
        # their lengths compare without normalizing the whole page's text too.
        whole = extract_plain_text(tree, **options)
        if len(raw) >= MIN_MAIN_SHARE * len(whole):
            return main, tree
        if not query or not _misses(wanted, lacking, fold(whole)):
            return (main if query else None), tree
        # The whole text names enough of the terms; do the parts the page tells? (Extracted
        # only here: the text outside links and navigation is part of the whole text.)
        told = extract_plain_text(tree, skip_elements=list(NOT_TOLD), **options)
    except Exception:  # a shortcut only: any trouble in it leaves the page to trafilatura
        return None, None
    return (None if _misses(wanted, lacking, fold(told)) else main), tree


def _lacking_terms(main: str, query: str) -> tuple[int, list[str]]:
    """How many distinct terms ``query`` has, and those of them ``main`` lacks."""
    wanted = set(query_terms(query)) if query else set()
    held = fold(main) if wanted else ""
    return len(wanted), [term for term in wanted if term not in held]


def _misses(wanted: int, lacking: list[str], shown: str | None) -> bool:
    """Whether the page's text outside the fast text (``shown``: the whole text, folded)
    names at least ``MAX_MISSED_QUERY_SHARE`` of the ``wanted`` distinct terms of the
    question, ``lacking`` being those the fast text lacks; with ``shown`` None, whether it
    could (all the lacking terms named)."""
    missed = len(lacking) if shown is None else sum(1 for term in lacking if term in shown)
    return wanted > 0 and missed >= MAX_MISSED_QUERY_SHARE * wanted


@functools.cache
def _depth_selector(depth: int) -> str:
    # An element with ``depth - 1`` element ancestors, i.e. ``depth`` levels down: lexbor
    # matches it right to left in C, each element failing after its own depth in steps (a
    # tenth of a millisecond on a large page, as little on a 10,000-level bomb), on the parse
    # the fast reading makes anyway.
    return " > ".join(["*"] * depth)


def _trafilatura_text(tree: Any, url: str, query: str) -> str:
    """trafilatura's main text of the parsed page (normalized, length-checked)."""
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
    return _checked(normalize_text(raw), url, query)


def _parse(html: str, url: str) -> Any:
    tree = _lxml_tree(html)
    if tree is None:
        # trafilatura refuses documents without "html" near the start that parse to a single
        # element, e.g. old pages that open with a <script>; browsers render them.
        tree = _lxml_tree(f"<html>{html}</html>")
    if tree is None:
        raise ExtractionFailed(url, reason="parser_error")
    return tree


def _lxml_tree(html: str) -> Any:
    """The tree trafilatura's ``load_html`` makes of a decoded string (its repairs, parser,
    fallback and refusal), or None; its one costly step made cheap (``_repaired``)."""
    from lxml.html import fromstring  # type: ignore[import-untyped]
    from trafilatura.utils import HTML_PARSER

    beginning = html[:50].lower()
    html = _repaired(html, beginning)
    try:
        tree = fromstring(html, parser=HTML_PARSER)
    except Exception:  # a declared encoding in a str, or hostile markup: the bytes next
        tree = None
    if tree is None or len(tree) < 1:
        try:
            tree = fromstring(html.encode("utf-8", "surrogatepass"), parser=HTML_PARSER)
        except Exception:
            return None
    if tree is not None and "html" not in beginning and len(tree) < 2:
        return None
    return tree


# trafilatura's repairs: the characters libxml2 refuses (C0 controls but tab and line
# breaks, U+FFFE, U+FFFF), a doctype that closes itself, a self-closing <html/>.
_REFUSED: Final = "".join(
    [*map(chr, range(0x09)), "\x0b\x0c", *map(chr, range(0x0E, 0x20)), "\ufffe\uffff"]
)
_REFUSED_CHARS = re.compile(f"[{re.escape(_REFUSED)}]")
_DOCTYPE_OPEN = re.compile("< ?! ?DOCTYPE", re.IGNORECASE)


def _repaired(html: str, beginning: str) -> str:
    """``html`` as trafilatura's ``repair_faulty_html`` leaves it. The refused characters are
    looked for with ``in`` first (a C search each: a third of the regex's scan of the page)
    and removed only where one occurs, as they almost never do."""
    from trafilatura.utils import repair_faulty_html

    if any(char in html for char in _REFUSED):
        html = _REFUSED_CHARS.sub("", html)
    if "doctype" in beginning:
        first, _, rest = html.partition("\n")
        html = _without_closed_doctype(first) + "\n" + rest
    for line in html[:4096].splitlines()[:4]:
        if "<html" in line and line.endswith("/>"):
            # Next to never: trafilatura's own repair, its other steps changing nothing now.
            return repair_faulty_html(html, "")
    return html


def _without_closed_doctype(line: str) -> str:
    """``line`` less a doctype opening it whose tag holds a "/" after its last "<" (an XHTML
    doctype's URLs), as trafilatura removes it, read without its backtracking pattern."""
    opening = _DOCTYPE_OPEN.match(line)
    if opening is None:
        return line
    end = line.find(">", opening.end())
    inside = line[opening.end() : end]
    return line[end + 1 :] if end >= 0 and inside.rfind("/") > inside.rfind("<") else line


def _checked(text: str, url: str, query: str) -> str:
    if not text:
        raise ExtractionFailed(url, reason="no_main_text")
    if is_too_short(text, query):
        raise ExtractionFailed(url, reason="too_short")
    return text


def _title(tree: Any) -> str:
    # trafilatura's own order: OpenGraph/meta, then JSON-LD, then <h1>/<title> heuristics.
    from trafilatura.metadata import examine_meta, extract_meta_json, extract_title

    # trafilatura strips markup from every meta's content with a pattern that rescans the
    # rest of the value from each "<" nothing closes: minutes for a content attribute of a
    # few hundred kilobytes of them. No title or date is that long.
    for meta in tree.iter("meta"):
        content = meta.get("content")
        if content is not None and len(content) > MAX_META_CHARS:
            meta.set("content", content[:MAX_META_CHARS])
    try:
        metadata = examine_meta(tree)
        # JSON-LD only fills a title the meta tags left empty: not parsed where they have one.
        if not metadata.title:
            # trafilatura guards this call the same way (malformed JSON-LD).
            with contextlib.suppress(Exception):
                metadata = extract_meta_json(tree, metadata)
        title = metadata.title or extract_title(tree) or ""
    except Exception:
        return ""
    return _one_line(str(title))


def _one_line(title: str) -> str:
    return " ".join(normalize_text(title).split("\n"))


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
    """The language the lxml tree's root or its first content-language <meta> declares."""
    candidates = [tree.get("lang"), tree.get("xml:lang")]
    # The first <meta http-equiv="content-language" content=…>, the name in any case.
    declared = (
        meta.get("content")
        for meta in tree.iter("meta")
        if (meta.get("http-equiv") or "").lower() == "content-language"
    )
    candidates.append(next((value for value in declared if value is not None), None))
    return _language_tag(candidates)


def _lexbor_language(tree: Any) -> str | None:
    """``_declared_language`` of the lexbor tree."""
    document = tree.document
    root = document.query_selector("html") if document is not None else None
    if root is None:
        return None
    candidates = [root.getattr("lang"), root.getattr("xml:lang")]
    declared = (
        meta.getattr("content")
        for meta in document.query_selector_all("meta[http-equiv][content]").values()
        if (meta.getattr("http-equiv") or "").lower() == "content-language"
    )
    candidates.append(next(declared, None))
    return _language_tag(candidates)


def _language_tag(candidates: list[Any]) -> str | None:
    """The first of ``candidates`` that is a well-formed language tag, lower-cased."""
    for value in candidates:
        if isinstance(value, str):
            tag = value.strip().lower().replace("_", "-")
            if _LANG_TAG.fullmatch(tag):
                return tag
    return None


def _script_language(text: str) -> str | None:
    """A hint from the writing system alone: "ja" (kana), "ko" (Hangul), "zh" (Han), else None."""
    sample = text[:_LETTER_SAMPLE]
    if sample.isascii():  # no kana, Hangul or Han: no letter needs counting
        return None
    letters = sum(map(str.isalpha, sample))
    if not letters:
        return None
    if len(_KANA.findall(sample)) * 10 >= letters:
        return "ja"
    if len(_HANGUL.findall(sample)) * 3 >= letters:
        return "ko"
    if len(_HAN.findall(sample)) * 3 >= letters:
        return "zh"
    return None
