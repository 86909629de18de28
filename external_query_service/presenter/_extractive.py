"""The presenter: turns an ``ExternalContextPacket`` into the reader's answer.

It sees the packet and nothing else (no settings, no store, no network). The template is
picked from structured fields only: ``packet.verifier.status`` selects the refusal
templates (``insufficient_evidence``, ``clarify``), otherwise ``packet.plan.answer_contract``
selects one of the three answer contracts. Evidence text never chooses a template, a
source label or a link.

Templates live in the top-level ``prompts/`` folder (shipped in the wheel as
``external_query_service/prompts``), one complete set per answer language (``zh/``, ``en/``),
and render in jinja2's sandbox. The language is the plan's (``language.answer_language``)
unless the presenter is told one. Evidence only ever enters templates as variables: it is
never compiled as a template.

Without an LLM the answer is extractive: quoted snippets, cleaned so that they cannot
carry links to hosts outside the admitted evidence, invisible characters, markdown
structure of their own or HTML markup (``&``, ``<`` and ``>`` from outside text are
written as character references, so a host rendering the Markdown with HTML allowed shows
them as text). The LLM prompt is rendered too, so the audit can record its
digest; in it each evidence sits between markers carrying a per-request random token.
"""

from __future__ import annotations

import re
import secrets
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jinja2 import FileSystemLoader, StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from .._digests import sha256_digest
from .._lazy import renamed
from ..errors import InputError
from ..models import (
    AdapterAttempt,
    AnswerContract,
    CopyGroup,
    DisplaySource,
    Evidence,
    ExternalContextPacket,
    Presentation,
)
from ..text._language import ANSWER_LANGUAGES, AnswerLanguage, LanguageSetting, answer_language
from ..text._parts import Part, covers, question_parts, share
from ..text._tokens import terms
from ..text._visible import strip_invisible

__all__ = [
    "ANSWER_PREFIX",
    "ANSWER_PREFIXES",
    "LINK_REMOVED",
    "ExtractivePresenter",
    "ListedSource",
    "display_sources",
    "listed_sources",
    "strip_invisible",
]

#: Every answer starts with its language's prefix; Chinese is the default language.
ANSWER_PREFIXES: dict[AnswerLanguage, str] = {"zh": "外部实时查询：", "en": "External live query: "}
ANSWER_PREFIX = ANSWER_PREFIXES["zh"]

_CONTRACTS: tuple[AnswerContract, ...] = (
    "direct_fact",
    "summary_with_sources",
    "compare_with_sources",
)
_REQUIRED_TEMPLATES: tuple[str, ...] = (
    *(f"{contract}.answer.j2" for contract in _CONTRACTS),
    *(f"{contract}.prompt.j2" for contract in _CONTRACTS),
    "insufficient_evidence.answer.j2",
    "clarify.answer.j2",
)
#: Bounds on the extractive answer, so one long page cannot flood it.
_SUMMARY_QUOTES = 3
_QUOTES_PER_TARGET = 3
_QUOTE_CHARS = 400
_LINE_CHARS = 200  # titles, site names, targets, candidates
_BOUNDARY_TRIES = 16
_BOUNDARY_SHAPE = re.compile(r"[0-9a-f]{8,64}")
#: What stands where a link or image was removed, in the answer's language.
LINK_REMOVED: dict[AnswerLanguage, str] = {"zh": "[链接已移除]", "en": "[link removed]"}

# --- text hygiene -----------------------------------------------------------------------


# Bounded quantifiers keep every pattern linear on hostile input.
_MD_IMAGE = re.compile(r"!\[[^\]\n]{0,400}\]\([^)\n]{0,400}\)")
_MD_LINK = re.compile(r"\[[^\]\n]{0,400}\]\(([^)\n]{0,400})\)")
_URL_CHARS = r"[^\s<>\"'`()\[\]{}|\\^「」『』（）【】《》，。；：！？、]"
_BARE_URL = re.compile(rf"(?i)(?:\b[a-z][a-z0-9+.-]{{0,15}}:)?//{_URL_CHARS}+|\bwww\.{_URL_CHARS}+")
_WHITESPACE = re.compile(r"\s+")


def _host(url: str) -> str | None:
    """The host a browser would visit for ``url``, or None when that is not clear."""
    target = url.strip()
    if target.lower().startswith("www."):
        target = "//" + target
    try:
        parts = urlsplit(target)
        host = parts.hostname
    except ValueError:
        return None
    # Userinfo and backslashes are where parsers disagree about the host; never trust them.
    if not host or "@" in parts.netloc or "\\" in target:
        return None
    return host.rstrip(".").lower()


def _hosts(evidence: Iterable[Evidence]) -> frozenset[str]:
    return frozenset(host for item in evidence if (host := _host(item.url)))


def _remove_foreign_links(text: str, allowed_hosts: frozenset[str], removed: str) -> str:
    """Replace images, and links whose host is not admitted, with ``removed`` (the
    language's ``LINK_REMOVED``); links kept become ``_kept_link`` tokens.

    Images are always removed: an answer is text, and an embedded image is a request the
    reader's client would make on the evidence's behalf. A link or bare URL is kept only
    when its host is admitted and its scheme is ``http`` or ``https`` (a bare URL may also
    have none): ``javascript://host/…`` names an admitted host too.
    """

    def link(match: re.Match[str]) -> str:
        destination = match.group(1).strip().split(" ", 1)[0]
        if _host(destination) not in allowed_hosts or not _web_url(destination):
            return removed
        label = match.group(0)[1 : match.start(1) - match.start(0) - 2]
        return _kept_link(label, destination)

    def bare(match: re.Match[str]) -> str:
        found = match.group(0)
        if _host(found) not in allowed_hosts or not _web_url(found, bare=True):
            return removed
        return found

    text = _MD_IMAGE.sub(removed, text)
    text = _MD_LINK.sub(link, text)
    return _BARE_URL.sub(bare, text)


def _web_url(url: str, *, bare: bool = False) -> bool:
    """Is ``url`` an ``http``/``https`` one (or, for a ``bare`` URL in text, scheme-less:
    ``//host``, ``www.host``)?"""
    lowered = url.lower()
    if lowered.startswith(("http://", "https://")):
        return True
    return bare and lowered.startswith(("//", "www."))


# A kept link travels through cleaning as a private-use token: ``strip_invisible`` has
# already removed every private-use character the outside text had, so none is forged.
_LINK_OPEN, _LINK_SPLIT, _LINK_CLOSE = "\ue000", "\ue001", "\ue002"
_KEPT_LINK = re.compile(
    f"{_LINK_OPEN}([^{_LINK_SPLIT}]*){_LINK_SPLIT}([^{_LINK_CLOSE}]*){_LINK_CLOSE}"
)


def _kept_link(label: str, url: str) -> str:
    return f"{_LINK_OPEN}{label}{_LINK_SPLIT}{url}{_LINK_CLOSE}"


def _clean(
    text: str, allowed_hosts: frozenset[str], removed: str, *, limit: int = _LINE_CHARS
) -> str:
    """Clean outside text for one line: no invisible characters, no foreign links (kept
    ones as ``_kept_link`` tokens), no line breaks (so it cannot open a block of its own)."""
    text = _WHITESPACE.sub(" ", strip_invisible(text)).strip()
    # Cut before removing links: the link patterns then run on bounded input, and a link
    # cut in half has a host nobody admitted, so it is removed rather than kept.
    cut = len(text) > limit
    text = _remove_foreign_links(text[:limit].rstrip(), allowed_hosts, removed)
    return text + "…" if cut else text


def _inline(text: str, allowed_hosts: frozenset[str], removed: str) -> str:
    """``_clean`` as plain text for a display field (kept links spelled as written)."""
    cleaned = _clean(text, allowed_hosts, removed)
    return _KEPT_LINK.sub(lambda match: f"[{match.group(1)}]({match.group(2)})", cleaned)


def _answer_line(
    text: str, language: AnswerLanguage, allowed_hosts: frozenset[str] = frozenset()
) -> str:
    """Outside text for one line of the answer, as CommonMark that renders as text."""
    return _markdown_text(_clean(text, allowed_hosts, LINK_REMOVED[language]))


def _quote_text(text: str, allowed_hosts: frozenset[str], language: AnswerLanguage) -> str:
    cleaned = _clean(text, allowed_hosts, LINK_REMOVED[language], limit=_QUOTE_CHARS)
    # Inner corner brackets become the nested form, so a snippet cannot close our quote.
    return _markdown_text(cleaned.replace("「", "『").replace("」", "』"))


def _no_markup(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` as character references.

    Applied where outside text enters the answer text (never to stored evidence or to the
    structured display fields): extraction decodes ``&lt;script&gt;`` in a page into
    ``<script>``, which would be live markup in a host that renders the answer's Markdown
    with HTML allowed. ``&`` is escaped too (and first), so text that already spells a
    reference reads back as written instead of being decoded.
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


#: CommonMark punctuation that can open or close inline structure (links, images, code,
#: emphasis, strikethrough, table cells); the backslash too, so escapes stay escapes.
_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]()!|~])")


def _markdown_text(text: str) -> str:
    """Outside text as CommonMark that renders as exactly that text.

    HTML characters become references (``_no_markup``) and every structural punctuation
    mark is backslash-escaped, so no title, snippet or placeholder can open a link, an
    image or emphasis, or close one of ours. Kept-link tokens (``_kept_link``) become
    links whose label is escaped the same way and whose destination sits in angle
    brackets, so nothing in it can end the link early.
    """
    parts: list[str] = []
    position = 0
    for match in _KEPT_LINK.finditer(text):
        parts.append(_escaped(text[position : match.start()]))
        parts.append(f"[{_escaped(match.group(1))}](<{_safe_url(match.group(2))}>)")
        position = match.end()
    parts.append(_escaped(text[position:]))
    return "".join(parts)


def _escaped(text: str) -> str:
    return _MD_PUNCTUATION.sub(r"\\\1", _no_markup(text))


def _markdown_url(url: str) -> str:
    """A source's URL (already ``_safe_url``) for the answer: an autolink in angle brackets
    when it is ``http``/``https`` (nothing in it can close the brackets: ``_safe_url``
    encoded ``<``, ``>`` and whitespace), a code span otherwise (its backticks
    percent-encoded, so nothing closes it), so a ``docs:`` or ``javascript:`` URL reads
    as written and never becomes a link."""
    if _web_url(url):
        return f"<{url}>"
    return "`" + url.replace("`", "%60") + "`"


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", strip_invisible(text)).casefold().strip()


# --- views handed to the templates ------------------------------------------------------


@dataclass(frozen=True)
class _SourceView:
    site: str
    title: str
    published: str  # YYYY-MM-DD or ""
    accessed: str  # YYYY-MM-DD HH:MM UTC
    url: str
    also_at: tuple[str, ...] = ()  # the URLs of copies of this source


@dataclass(frozen=True)
class _QuoteView:
    text: str
    site: str
    published: str
    about_first: str
    about_last: str


@dataclass(frozen=True)
class _DisputeView:
    first: _QuoteView
    second: _QuoteView
    first_value: str
    second_value: str


@dataclass(frozen=True)
class _SectionView:
    target: str
    quotes: tuple[_QuoteView, ...]


@dataclass(frozen=True)
class _CauseView:
    """One attempt that gathered nothing, as the refusal sentence names it: the provider's
    host (or the adapter id, for one that was not ready) and its ``AttemptCause`` codes,
    every text cleaned for the answer."""

    name: str
    status: int | None
    meaning: str
    setting: str
    request: str = ""


def _cause_context(
    attempts: Iterable[AdapterAttempt], language: AnswerLanguage
) -> dict[str, object]:
    """What the refusal template says beyond the reason code, from the attempts' causes:
    ``refusals`` (providers that refused the request, by host, or had no key),
    ``not_ready`` (adapters skipped as not ready, by id: the name in the reader's
    settings), ``page_hosts`` and ``page_setting`` (result pages that all failed for one
    cause)."""
    refusals: list[_CauseView] = []
    not_ready: list[_CauseView] = []
    page_hosts: dict[str, None] = {}
    page_setting = ""
    for attempt in attempts:
        cause = attempt.cause
        if cause is None:
            continue
        setting = _answer_line(cause.setting or "", language)
        if cause.pages is not None:
            hosts = (t for h in cause.hosts if (t := _answer_line(h, language)))
            page_hosts.update(dict.fromkeys(hosts))
            page_setting = page_setting or setting
        elif attempt.status == "skipped" and cause.meaning:
            name = _answer_line(attempt.adapter_id, language)
            not_ready.append(_CauseView(name, None, cause.meaning, setting))
        elif cause.status is not None or cause.meaning:
            name = _answer_line(attempt.source or "", language)
            request = _answer_line(cause.request or "", language)
            refusals.append(_CauseView(name, cause.status, cause.meaning or "", setting, request))
    return {
        "refusals": tuple(refusals),
        "not_ready": tuple(not_ready),
        "page_hosts": tuple(page_hosts),
        "page_setting": page_setting,
    }


@dataclass(frozen=True)
class _PromptEvidenceView:
    evidence_id: str
    site: str
    title: str
    published: str
    about: tuple[str, ...]
    text: str


def _utc(moment: datetime) -> datetime:
    # A naive time is taken as UTC, the stated unit of ``accessed_at``.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _day(value: date | None) -> str:
    return value.isoformat() if value is not None else ""


def _safe_url(url: str) -> str:
    # The URL comes from the ledger, not from text; only keep it on one unbroken token.
    cleaned = strip_invisible(url).strip()
    return _WHITESPACE.sub("%20", cleaned).replace("<", "%3C").replace(">", "%3E")


def _summary_quotes(ranked: list[Evidence], parts: tuple[Part, ...] = ()) -> list[Evidence]:
    """For a question asked in parts, the snippet holding most of each part's own terms
    first (so every part the passages answer is quoted); then the best snippet of each
    site (independent voices), then — when fewer sites than quotes allowed — the best
    snippet of each further page (one local folder is one site but many documents)."""
    per_site: dict[str, Evidence] = {}
    per_page: dict[str, Evidence] = {}
    for item in ranked:
        per_site.setdefault(item.site, item)
        per_page.setdefault(item.url, item)
    chosen: list[Evidence] = []
    if parts:
        held = [(item, frozenset(terms(f"{item.title}\n{item.snippet}"))) for item in ranked]
        for part in parts:
            # The passage holding most of the part's own terms (the best ranked among equals).
            shares = [(share(part, found), -index) for index, (_item, found) in enumerate(held)]
            best, at = max(shares, default=(0.0, 0))
            if best and covers(part, held[-at][1]) and held[-at][0] not in chosen:
                chosen.append(held[-at][0])
    allowed = max(_SUMMARY_QUOTES, len(chosen))
    for item in (*per_site.values(), *per_page.values()):
        if len(chosen) >= allowed:
            break
        if item not in chosen:
            chosen.append(item)
    return chosen


def display_sources(
    evidence: Iterable[Evidence], language: AnswerLanguage = "zh"
) -> tuple[DisplaySource, ...]:
    """Display fields of ``evidence``, first-seen order, one entry per URL.

    Site, title and URL come from the evidence record (the gateway's ledger), never from
    what the page text claims; titles are cleaned like quotes (a removed link reads as
    ``language``'s placeholder). The fields are plain text: the answer escapes them.
    """
    items = tuple(evidence)
    sources: dict[str, DisplaySource] = {}
    for source in _each_source(items, items, language):
        sources.setdefault(source.url, source)
    return tuple(sources.values())


@dataclass(frozen=True)
class ListedSource:
    """One entry of an answer's source list: the source, the URLs of its copies (shown as
    "also at"), and every evidence id the entry stands for (its own and its copies')."""

    source: DisplaySource
    also_at: tuple[str, ...]
    evidence_ids: tuple[str, ...]


def listed_sources(
    evidence: Iterable[Evidence],
    copies: Sequence[CopyGroup] = (),
    language: AnswerLanguage = "zh",
) -> tuple[ListedSource, ...]:
    """The source list of an answer: one entry per URL, first-seen order, except that a copy
    (``copies``: near-duplicates the verifier merged) is listed under its original's entry
    as "also at" instead of as an entry of its own."""
    items = tuple(evidence)
    by_id = {item.evidence_id: item for item in items}
    original_of = {
        copy: group.original
        for group in copies
        if group.original in by_id
        for copy in group.copies
        if copy in by_id
    }
    kept = [item for item in items if item.evidence_id not in original_of]
    entries: dict[str, tuple[DisplaySource, list[str], list[str]]] = {}
    for item, source in zip(kept, _each_source(kept, items, language), strict=True):
        entry = entries.setdefault(source.url, (source, [], []))
        entry[2].append(item.evidence_id)
    url_of = {item.evidence_id: _safe_url(item.url) for item in items}
    for copy, original in original_of.items():
        source, also_at, ids = entries[url_of[original]]
        if url_of[copy] != source.url and url_of[copy] not in also_at:
            also_at.append(url_of[copy])
        ids.append(copy)
    return tuple(
        ListedSource(source, tuple(also_at), tuple(ids))
        for source, also_at, ids in entries.values()
    )


def _each_source(
    kept: Sequence[Evidence], every: Sequence[Evidence], language: AnswerLanguage
) -> list[DisplaySource]:
    """The display fields of each of ``kept`` (links cleaned against all of ``every``; a
    removed link reads as ``language``'s placeholder)."""
    allowed = _hosts(every)
    return [
        DisplaySource(
            site=_site(item),
            title=_inline(item.title, allowed, LINK_REMOVED[language]),
            url=_safe_url(item.url),
            published_at=item.published_at,
            accessed_at=_utc(item.accessed_at),
        )
        for item in kept
    ]


def _site(item: Evidence) -> str:
    # The site label is the gateway's, derived from the URL: it is not link-cleaned (a
    # "www." site is a name here, not a link) and falls back to the URL's host.
    return _single_line(item.site)[:_LINE_CHARS] or (_host(item.url) or "")


def _source_view(source: DisplaySource, also_at: tuple[str, ...] = ()) -> _SourceView:
    # The display fields stay as the evidence gave them; only the answer text is escaped.
    return _SourceView(
        site=_escaped(source.site),
        title=_escaped(source.title),
        published=_day(source.published_at),
        accessed=_utc(source.accessed_at).strftime("%Y-%m-%d %H:%M UTC"),
        url=_markdown_url(source.url),
        also_at=tuple(_markdown_url(url) for url in also_at),
    )


def _dispute_views(
    packet: ExternalContextPacket, allowed_hosts: frozenset[str], language: AnswerLanguage
) -> tuple[_DisputeView, ...]:
    """Both sides of each disagreement the verifier recorded, quoted."""
    by_id = {item.evidence_id: item for item in packet.verified_evidence}
    views = []
    for conflict in packet.verifier.conflicts:
        first, second = (by_id.get(evidence_id) for evidence_id in conflict.evidence_ids)
        if first is None or second is None:
            continue
        views.append(
            _DisputeView(
                first=_quote_view(first, allowed_hosts, language),
                second=_quote_view(second, allowed_hosts, language),
                first_value=_answer_line(conflict.values[0], language),
                second_value=_answer_line(conflict.values[1], language),
            )
        )
    return tuple(views)


def _quote_view(
    item: Evidence, allowed_hosts: frozenset[str], language: AnswerLanguage
) -> _QuoteView:
    about = sorted(set(item.about_dates))
    return _QuoteView(
        text=_quote_text(item.snippet, allowed_hosts, language),
        site=_escaped(_site(item)),
        published=_day(item.published_at),
        about_first=_day(about[0]) if about else "",
        about_last=_day(about[-1]) if about else "",
    )


def _by_score(evidence: tuple[Evidence, ...]) -> list[Evidence]:
    # Stable sort: equal scores keep the packet's order.
    return sorted(evidence, key=lambda item: -item.score)


def _matches(target: str, item: Evidence) -> bool:
    """Does ``item`` speak about ``target``?

    Only packet content decides: the target (NFKC, casefolded) must occur in what the
    evidence was gathered for, its title, its snippet, or a name its provider gave it.
    """
    needle = _fold(target)
    if not needle:
        return False
    haystacks = (item.gathered_for or "", item.title, item.snippet, *item.aliases)
    return any(needle in _fold(text) for text in haystacks)


# --- the presenter ----------------------------------------------------------------------


def _default_templates_dir() -> Path:
    package = Path(__file__).resolve().parent.parent
    # Installed wheel first (force-included as the package's own folder), then a checkout.
    for candidate in (package / "prompts", package.parent / "prompts"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("the presenter's prompts/ folder is missing from the installation")


class ExtractivePresenter:
    """Renders the answer (extractive) and the LLM prompt for a packet."""

    def __init__(
        self,
        *,
        templates_dir: Path | None = None,
        token_factory: Callable[[], str] | None = None,
        language: LanguageSetting = "auto",
    ) -> None:
        """``token_factory`` makes the prompt's boundary token (16 random hex digits by
        default); pass one to make prompt digests reproducible in regression runs.
        ``language`` is ``[presenter] language``: ``auto`` answers in the plan's language."""
        directory = templates_dir if templates_dir is not None else _default_templates_dir()
        missing = [
            f"{lang}/{name}"
            for lang in ANSWER_LANGUAGES
            for name in _REQUIRED_TEMPLATES
            if not (directory / lang / name).is_file()
        ]
        if missing:
            raise InputError(f"templates missing from {directory}: {', '.join(missing)}")
        self._templates_dir = directory
        self._token_factory = token_factory or (lambda: secrets.token_hex(8))
        self._language: LanguageSetting = language
        # One environment per language, each rooted at its own folder, so templates import
        # their macros by the same names in every language.
        self._envs = {
            lang: SandboxedEnvironment(
                loader=FileSystemLoader(str(directory / lang)),
                undefined=StrictUndefined,
                autoescape=False,
                keep_trailing_newline=True,
                trim_blocks=True,
                lstrip_blocks=True,
            )
            for lang in ANSWER_LANGUAGES
        }
        for env in self._envs.values():
            env.filters["markdown_text"] = _markdown_text

    def load_templates(self) -> None:
        """Compile every template of every language now (jinja2 caches them), so the first
        answer does not pay for it. Raises jinja2's ``TemplateSyntaxError`` on a broken one."""
        for env in self._envs.values():
            for name in env.list_templates(extensions=["j2"]):
                env.get_template(name)

    def language(self, packet: ExternalContextPacket) -> AnswerLanguage:
        """The language the answer to ``packet`` is written in."""
        return answer_language(packet.plan.language, self._language)

    def _render(self, language: AnswerLanguage, template: str, context: object) -> str:
        return self._envs[language].get_template(template).render(context)

    @property
    def templates_dir(self) -> Path:
        """The folder the templates are read from (one subfolder per answer language)."""
        return self._templates_dir

    def present(self, packet: ExternalContextPacket) -> Presentation:
        """The extractive answer for ``packet``.

        ``clarify`` asks, ``insufficient_evidence`` says what is missing (no sources);
        an ``answered`` packet with no admitted evidence is refused the same way, since
        there is nothing it may quote.
        """
        verifier = packet.verifier
        language = self.language(packet)
        if verifier.status == "clarify":
            return self._refusal(
                language,
                "clarify.answer.j2",
                options=tuple(
                    text for o in verifier.clarify_options if (text := _answer_line(o, language))
                ),
                # Slot names stay keys for the template's labels; an unknown one is shown
                # as given through the ``markdown_text`` filter: it is outside text too.
                missing_slots=tuple(
                    _inline(s, frozenset(), LINK_REMOVED[language]) for s in verifier.missing_slots
                ),
            )
        admitted = packet.verified_evidence
        if verifier.status == "insufficient_evidence" or not admitted:
            # An "answered" verdict with nothing admitted has nothing it may quote.
            answered = verifier.status == "answered"
            return self._refusal(
                language,
                "insufficient_evidence.answer.j2",
                reason="no_matching_evidence" if answered else verifier.reason,
                missing_targets=tuple(
                    text for t in verifier.missing_targets if (text := _answer_line(t, language))
                ),
                # The providers that failed, by host, so a reader knows which one to check.
                hosts=tuple(
                    dict.fromkeys(
                        text
                        for attempt in packet.adapter_attempts
                        if attempt.status in ("failed", "timeout") and attempt.source
                        if (text := _answer_line(attempt.source, language))
                    )
                ),
                **_cause_context(packet.adapter_attempts, language),
            )

        contract = packet.plan.answer_contract
        allowed = _hosts(admitted)
        sources = display_sources(admitted, language)
        listed = listed_sources(admitted, verifier.copies, language)
        copied = {copy for group in verifier.copies for copy in group.copies}
        context: dict[str, object] = {
            "sources": tuple(_source_view(entry.source, entry.also_at) for entry in listed),
            "notes": tuple(
                text for n in packet.uncertainties if (text := _answer_line(n, language, allowed))
            ),
            "disputes": _dispute_views(packet, allowed, language),
        }
        # A copy is quoted as its original: the same text once, not once per site.
        ranked = _by_score(tuple(item for item in admitted if item.evidence_id not in copied))
        if contract == "direct_fact":
            # Answered despite a disagreement means a majority holds one value: quote it.
            dissent = {eid for c in verifier.conflicts if c.majority for eid in c.dissenting}
            best = next((item for item in ranked if item.evidence_id not in dissent), ranked[0])
            context["best"] = _quote_view(best, allowed, language)
        elif contract == "summary_with_sources":
            parts = () if packet.plan.compare_targets else question_parts(packet.plan.question)
            quotes = _summary_quotes(ranked, parts)
            context["quotes"] = tuple(_quote_view(item, allowed, language) for item in quotes)
            context["missing_parts"] = tuple(
                text for part in verifier.missing_parts if (text := _answer_line(part, language))
            )
        else:
            targets = packet.plan.compare_targets or packet.plan.targets
            context["sections"] = tuple(
                _SectionView(
                    target=_answer_line(target, language),
                    quotes=tuple(
                        _quote_view(item, allowed, language)
                        for item in [e for e in ranked if _matches(target, e)][:_QUOTES_PER_TARGET]
                    ),
                )
                for target in targets
            )
        template = f"{contract}.answer.j2"
        prompt = self.render_prompt(packet)
        return Presentation(
            text=self._render(language, template, context).rstrip(),
            sources=sources,
            template=f"{language}/{template}",
            prompt_template=f"{language}/{contract}.prompt.j2",
            prompt_digest=sha256_digest(prompt),
            renderer="extractive",
        )

    def render_sources(
        self,
        sources: tuple[DisplaySource, ...],
        language: AnswerLanguage = "zh",
        *,
        also_at: Mapping[str, tuple[str, ...]] | None = None,
    ) -> str:
        """The numbered source list ("来源：", "Sources:") the extractive answers end with;
        ``also_at`` maps a source's URL to the URLs of its copies.

        Another renderer (the LLM presenter) appends it so every answer lists its sources
        the same way, from display fields only.
        """
        copies = also_at or {}
        views = tuple(_source_view(source, copies.get(source.url, ())) for source in sources)
        # Macros are attributes of the module jinja builds; the stubs cannot know them.
        return str(self._macros(language).source_list(views))

    def render_disputes(self, packet: ExternalContextPacket) -> str:
        """The "sources disagree" block (both quotes of each disagreement the verifier
        recorded) that summary and comparison answers show; ``""`` when none."""
        language = self.language(packet)
        views = _dispute_views(packet, _hosts(packet.verified_evidence), language)
        return str(self._macros(language).disputes_list(views))

    def render_missing_parts(self, packet: ExternalContextPacket) -> str:
        """The lines naming each part of a question asked in parts that no admitted
        evidence covers (``VerifierResult.missing_parts``); ``""`` when none."""
        language = self.language(packet)
        parts = tuple(
            text for part in packet.verifier.missing_parts if (text := _answer_line(part, language))
        )
        return str(self._macros(language).missing_list(parts))

    def _macros(self, language: AnswerLanguage) -> Any:
        # The module jinja builds from the macros file: its macros are attributes the type
        # stubs cannot know.
        return self._envs[language].get_template("_answer.macros.j2").make_module()

    def render_prompt(self, packet: ExternalContextPacket, *, boundary: str | None = None) -> str:
        """The LLM prompt for the packet's contract, built from packet content only.

        Each admitted evidence sits between ``<<EVIDENCE-{token}>>`` and
        ``<<END-EVIDENCE-{token}>>``. The token never occurs in any text the prompt
        carries (a random one is redrawn; an explicit one that occurs is refused), so no
        evidence can close its own block.
        """
        plan = packet.plan
        evidence = tuple(
            _PromptEvidenceView(
                evidence_id=strip_invisible(item.evidence_id),
                site=_single_line(item.site),
                title=_single_line(item.title),
                published=_day(item.published_at),
                about=tuple(_day(day) for day in sorted(set(item.about_dates))),
                text=strip_invisible(item.snippet).strip(),
            )
            for item in packet.verified_evidence
        )
        time_range = plan.time_range
        context: dict[str, object] = {
            "question": _single_line(packet.question),
            "time_start": _day(time_range.start) if time_range else "",
            "time_end": _day(time_range.end) if time_range else "",
            "location": _single_line(plan.location or ""),
            "targets": tuple(_single_line(t) for t in plan.targets),
            "compare_targets": tuple(_single_line(t) for t in plan.compare_targets),
            "evidence": evidence,
            "uncertainties": tuple(_single_line(u) for u in packet.uncertainties),
        }
        carried = [text for value in context.values() for text in _texts(value)]
        context["boundary"] = self._boundary(carried, boundary)
        return self._render(self.language(packet), f"{plan.answer_contract}.prompt.j2", context)

    def _boundary(self, carried: list[str], explicit: str | None) -> str:
        if explicit is not None:
            if not _BOUNDARY_SHAPE.fullmatch(explicit):
                raise InputError("a prompt boundary is 8 to 64 lowercase hex digits")
            if any(explicit in text for text in carried):
                raise InputError("the prompt boundary occurs in the packet's text")
            return explicit
        for _ in range(_BOUNDARY_TRIES):
            token = self._token_factory()
            if _BOUNDARY_SHAPE.fullmatch(token) and not any(token in text for text in carried):
                return token
        raise InputError("token_factory gave no usable prompt boundary")

    def _refusal(self, language: AnswerLanguage, template: str, **context: object) -> Presentation:
        text = self._render(language, template, context).rstrip()
        return Presentation(
            text=text,
            sources=(),
            template=f"{language}/{template}",
            prompt_template="",
            prompt_digest="",
            renderer="extractive",
        )


def _single_line(text: str) -> str:
    return _WHITESPACE.sub(" ", strip_invisible(text)).strip()


def _texts(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, tuple):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, _PromptEvidenceView):
        yield from (value.evidence_id, value.site, value.title, value.text)


#: The old class name, kept for one release (a ``DeprecationWarning`` on use).
__getattr__ = renamed(__name__, {"ExternalAnswerPresenter": "ExtractivePresenter"})
