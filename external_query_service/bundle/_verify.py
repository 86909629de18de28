"""Checking an answer bundle again: offline from its own bytes, or against the pages it cites.

Offline, the bundle's id, every source's id and (with a key) its signature are recomputed
(``_bundle.read_bundle``): an edited quote, URL or status, or a signature that does not
verify, is ``tampered``. With ``refetch``, every cited URL is fetched once more through the
service's own guarded fetcher (``net.SafeFetcher``, the same network policy and limits),
each distinct URL once, all at once; a body with the same raw digest as when quoted holds
as it stands, any other is read by the same reader (``text.analyse_page`` with the query it
was read for) and each quote looked for in the text:

- ``holds``: the same words are there (whitespace aside), and for a PDF on the same page;
- ``changed``: the page is there but the quote is not (or sits on another PDF page): the
  closest passage now on the page is named;
- ``gone``: 404, 410 or another refusal of the request (4xx), refused by the network policy,
  or no longer a document (a type or size this service does not read, no main text);
- ``unreachable``: no answer, a timeout, a 5xx, 408 or 429: trying later may tell
  (``retryable``).

A fact API's reply is a value, not a page: it holds when the bytes are the same and is
``changed`` otherwise. Text nobody fetched as a page (a search engine's snippet, a
documentation server's text under ``docs://``, a search provider's page text) cannot be
fetched again: its source keeps its offline verdict and says why.

The answer as a whole takes the worst of its sources' verdicts and its own, in the order
``tampered``, ``gone``, ``changed``, ``unreachable``, ``holds``: it holds only when every
quote holds. A bundle whose plan ids the configured ledger does not hold says so in
``ledger`` (never an error: a bundle travels, its ledger need not).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from rapidfuzz import fuzz

from .._bundle import BundleSource, ReadBundle, bundle_secret, read_bundle
from .._digests import sha256_digest
from .._frozen import Frozen
from .._version import __version__
from ..errors import (
    BlockedDestination,
    ContentTooLarge,
    ExtractionFailed,
    FetchError,
    LedgerError,
    TooManyRedirects,
    UnsafeURL,
    UnsupportedContent,
    UpstreamStatus,
)
from ..net._fetch import DEFAULT_ACCEPT_TYPES, FetchedPage, SafeFetcher
from ..settings import Settings
from ..text._analyse import PageAnalysis, analyse_page

__all__ = [
    "VERDICTS",
    "BundleVerdict",
    "BundleVerification",
    "LedgerState",
    "SourceVerification",
    "averify_bundle",
    "closest_passage",
    "locate",
    "verify_bundle",
]

BundleVerdict = Literal["holds", "tampered", "changed", "gone", "unreachable"]
#: Worst first: the answer as a whole takes the first of these any source has.
VERDICTS: Final[tuple[BundleVerdict, ...]] = ("tampered", "gone", "changed", "unreachable", "holds")
#: Whether the configured ledger holds the bundle's plan ids and receipt digests:
#: ``not_configured`` (no ``[ledger]``), ``held`` (all), ``partly_held``, ``not_held``
#: (none), ``unavailable`` (it could not be read; said, never raised).
LedgerState = Literal["not_configured", "held", "partly_held", "not_held", "unavailable"]

#: Statuses after which the page may come back (try again later); any other non-2xx is gone.
_RETRYABLE_STATUSES: Final = frozenset({408, 425, 429})
#: Bases whose text this service read from a fetched body, so a fetch can read it again.
_PAGE_BASES: Final = frozenset({"page_body"})
_NOT_REFETCHABLE: Final = {
    "search_snippet": "a search engine's snippet: the page itself was never read",
    "provider_text": "a search provider's text of the page: this service did not read it",
    "doc_body": "a documentation server's text, not a fetchable page",
}
_VALUE_TYPES: Final = DEFAULT_ACCEPT_TYPES | {"application/json"}
#: Characters of a closest passage shown; a quote is a chunk, so the passage is one too.
_CLOSEST_CHARS: Final = 400
_T = TypeVar("_T")


class SourceVerification(Frozen):
    """One quote's verdict: ``detail`` says why in one line; ``closest`` is the passage now
    on the page nearest the quote (``changed`` only); ``refetched`` whether its URL was
    fetched again; ``retryable`` for ``unreachable``."""

    evidence_id: str
    url: str
    page: int | None = None
    verdict: BundleVerdict
    detail: str = ""
    closest: str | None = None
    refetched: bool = False
    retryable: bool = False


class BundleVerification(Frozen):
    """What ``verify_bundle`` found: the answer's ``verdict`` and each source's."""

    bundle_id: str
    verdict: BundleVerdict
    retryable: bool
    refetched: bool
    #: ``valid``, ``invalid`` (then ``tampered``), ``absent``, or ``unchecked`` (signed, but
    #: no ``[bundle] signing_key_env`` here).
    signature: Literal["valid", "invalid", "absent", "unchecked"]
    ledger: LedgerState
    ledger_detail: str = ""
    #: The answer's outcome as the bundle states it.
    status: str
    detail: str = ""
    sources: tuple[SourceVerification, ...]


def verify_bundle(
    bundle: str | bytes, *, settings: Settings | None = None, refetch: bool = False
) -> BundleVerification:
    """Check ``bundle`` (the text ``answer.bundle()`` made) offline, or with ``refetch``
    against the pages it cites (module docstring). Text that is not a bundle is an
    ``InputError``; an edited one is a ``tampered`` verdict, not an error."""
    return _run_sync(averify_bundle(bundle, settings=settings, refetch=refetch))


async def averify_bundle(
    bundle: str | bytes, *, settings: Settings | None = None, refetch: bool = False
) -> BundleVerification:
    """``verify_bundle`` for a caller already in an event loop."""
    settings = settings or Settings()
    read = read_bundle(bundle, signing_key=bundle_secret(settings.bundle.signing_key_env))
    offline = _offline(read)
    whole, detail = _whole(read)
    sources = offline
    if refetch and whole != "tampered" and not any(s.verdict == "tampered" for s in offline):
        sources = await _refetched(read.bundle.sources, offline, settings)
    ledger: LedgerState = "not_configured"
    ledger_detail = ""
    if settings.ledger.url is not None or settings.ledger.path is not None:
        # A database read, off the event loop; without a ledger no thread is started.
        ledger, ledger_detail = await asyncio.to_thread(_ledger_state, read, settings)
    verdict = _worst([whole, *(item.verdict for item in sources)])
    return BundleVerification(
        bundle_id=read.bundle.bundle_id,
        verdict=verdict,
        retryable=verdict == "unreachable",
        refetched=refetch and any(item.refetched for item in sources),
        signature=read.signature,
        ledger=ledger,
        ledger_detail=ledger_detail,
        status=read.bundle.status,
        detail=(detail or _summary(verdict, sources)) + _unsigned(read, settings),
        sources=tuple(sources),
    )


def _run_sync(work: Coroutine[Any, Any, _T]) -> _T:
    """Run ``work`` to its end from synchronous code, also under a running event loop (in a
    thread of its own, which then has its own loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


def _unsigned(read: ReadBundle, settings: Settings) -> str:
    """Where bundles are signed, an unsigned one is said to be: an edit that recomputed
    every digest would not show in it."""
    if read.signature == "absent" and settings.bundle.signing_key_env:
        return "; unsigned, though a signing key is configured here"
    return ""


def _worst(verdicts: Sequence[BundleVerdict]) -> BundleVerdict:
    return min(verdicts, key=VERDICTS.index, default="holds")


def _whole(read: ReadBundle) -> tuple[BundleVerdict, str]:
    """The verdict of the bundle's own fields (id and signature) and why."""
    if read.signature == "invalid":
        return "tampered", "the signature does not verify: the bundle was edited or not ours"
    if not read.id_holds:
        return "tampered", "bundle_id is not the digest of the bundle: it was edited"
    return "holds", ""


def _offline(read: ReadBundle) -> list[SourceVerification]:
    return [
        SourceVerification(
            evidence_id=source.evidence_id,
            url=source.url,
            page=source.page,
            verdict="tampered" if source.evidence_id in read.tampered_sources else "holds",
            detail=(
                "source_id is not the digest of the source: a quote, URL or digest was edited"
                if source.evidence_id in read.tampered_sources
                else "the bundle's own digests hold"
            ),
        )
        for source in read.bundle.sources
    ]


def _summary(verdict: BundleVerdict, sources: Sequence[SourceVerification]) -> str:
    counts = {name: sum(item.verdict == name for item in sources) for name in VERDICTS}
    shown = ", ".join(f"{count} {name}" for name, count in counts.items() if count)
    return f"{verdict}: {len(sources)} source(s)" + (f" ({shown})" if shown else "")


# -- refetching -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Fetched:
    """One URL fetched again: its page, or the verdict its failure is."""

    page: FetchedPage | None = None
    verdict: BundleVerdict = "holds"
    detail: str = ""


async def _refetched(
    sources: Sequence[BundleSource], offline: Sequence[SourceVerification], settings: Settings
) -> list[SourceVerification]:
    """Each refetchable source judged against its page fetched again (each URL once)."""
    # Pages as the answers fetched them; a fact API's reply is JSON, which pages never are.
    fetchers = {
        False: SafeFetcher(settings.network),
        True: SafeFetcher(settings.network, accept_types=_VALUE_TYPES),
    }
    wanted: dict[str, SafeFetcher] = {}
    for source in sources:
        if _refetchable(source) is None:
            wanted.setdefault(source.final_url, fetchers[source.basis == "fact_api"])
    deadline = asyncio.get_running_loop().time() + settings.network.deadline_s
    try:
        fetched = await asyncio.gather(
            *(_fetch(fetcher, url, deadline) for url, fetcher in wanted.items())
        )
    finally:
        for fetcher in fetchers.values():
            await fetcher.aclose()
    by_url = dict(zip(wanted, fetched, strict=True))
    # Only a page whose bytes changed is read again; each (page, query) once, all at once.
    reads: dict[tuple[str, str], FetchedPage] = {}
    for source in sources:
        page = by_url[source.final_url].page if _refetchable(source) is None else None
        changed = page is not None and page.raw_digest != source.raw_digest
        if page is not None and changed and source.basis in _PAGE_BASES:
            reads.setdefault((source.final_url, source.reader.query), page)
    done = await asyncio.gather(
        *(_analysed(page, query, settings) for (_, query), page in reads.items())
    )
    analyses = dict(zip(reads, done, strict=True))
    judged = []
    for source, kept in zip(sources, offline, strict=True):
        why = _refetchable(source)
        if why is not None:
            judged.append(kept.model_copy(update={"detail": f"not fetched again: {why}"}))
            continue
        judged.append(_judge(source, by_url[source.final_url], analyses))
    return judged


def _refetchable(source: BundleSource) -> str | None:
    """None when ``source`` can be fetched again, else why not."""
    if not source.final_url.startswith(("http://", "https://")):
        return f"{source.final_url.split(':', 1)[0]}: is not a web address"
    if source.basis in _PAGE_BASES or source.basis == "fact_api":
        return None
    return _NOT_REFETCHABLE.get(source.basis, f"basis {source.basis} is not a page")


async def _fetch(fetcher: SafeFetcher, url: str, deadline: float) -> _Fetched:
    try:
        return _Fetched(page=await fetcher.fetch(url, deadline=deadline))
    except UpstreamStatus as exc:
        status = exc.status
        if status is not None and (status >= 500 or status in _RETRYABLE_STATUSES):
            return _Fetched(verdict="unreachable", detail=f"the server answered {status}")
        return _Fetched(verdict="gone", detail=f"the server answered {status}")
    except (BlockedDestination, UnsafeURL, TooManyRedirects) as exc:
        return _Fetched(verdict="gone", detail=f"refused by the network policy: {exc.reason}")
    except FetchError as exc:
        if isinstance(exc, ContentTooLarge | UnsupportedContent) or exc.reason in _NOT_A_DOCUMENT:
            return _Fetched(verdict="gone", detail=f"no longer a document: {exc.reason}")
        return _Fetched(verdict="unreachable", detail=f"no answer: {exc.reason}")


#: Fetch failures that say the body is no document this service reads.
_NOT_A_DOCUMENT: Final = frozenset({"decoding_failed"})


def _judge(
    source: BundleSource,
    fetched: _Fetched,
    analyses: dict[tuple[str, str], PageAnalysis | ExtractionFailed | FetchError],
) -> SourceVerification:
    base = SourceVerification(
        evidence_id=source.evidence_id,
        url=source.url,
        page=source.page,
        verdict="holds",
        refetched=True,
    )
    page = fetched.page
    if page is None:
        return base.model_copy(
            update={
                "verdict": fetched.verdict,
                "detail": fetched.detail,
                "retryable": fetched.verdict == "unreachable",
            }
        )
    if page.raw_digest == source.raw_digest:
        return base.model_copy(update={"detail": "the same bytes as when quoted"})
    if source.basis == "fact_api":
        return base.model_copy(
            update={"verdict": "changed", "detail": "the provider's reply is no longer the same"}
        )
    analysis = analyses[(source.final_url, source.reader.query)]
    if not isinstance(analysis, PageAnalysis):
        return base.model_copy(
            update={"verdict": "gone", "detail": f"no longer a document: {analysis.reason}"}
        )
    return _compare(base, source, analysis)


async def _analysed(
    page: FetchedPage, query: str, settings: Settings
) -> PageAnalysis | ExtractionFailed | FetchError:
    """The page read as when it was quoted: the same reader, for the same ``query``."""
    try:
        return await asyncio.to_thread(
            analyse_page,
            page.body,
            url=page.final_url,
            declared_charset=page.charset,
            content_type=page.content_type,
            query=query,
            pdf_max_pages=settings.network.max_pdf_pages,
        )
    except (ExtractionFailed, FetchError) as exc:
        return exc


def _compare(
    base: SourceVerification, source: BundleSource, analysis: PageAnalysis
) -> SourceVerification:
    text = analysis.text
    found = locate(source.quote, text)
    if found is None:
        closest = closest_passage(source.quote, text)
        return base.model_copy(
            update={
                "verdict": "changed",
                "detail": "the quote is no longer on the page" + _reading_caveat(source),
                "closest": closest,
            }
        )
    same_text = sha256_digest(text) == source.text_digest
    where = "the same text as when quoted" if same_text else "the quote is still on the page"
    if source.page is not None:
        now = analysis.page_at(found)
        if now != source.page:
            return base.model_copy(
                update={
                    "verdict": "changed",
                    "detail": f"the quote is now on page {now}, not page {source.page}",
                    "closest": source.quote,
                }
            )
        where += f" (page {now})"
    return base.model_copy(update={"detail": where})


def _reading_caveat(source: BundleSource) -> str:
    """What may account for a quote not found besides the page: another reader."""
    if source.reader.name == "browser_main_text":
        return " (quoted from the page as a browser showed it; read again as fetched)"
    if source.reader.version != __version__:
        return f" (quoted by reader {source.reader.version}, read again by {__version__})"
    return ""


def _collapsed(text: str) -> tuple[str, list[int]]:
    """``text`` with every run of whitespace one space, and each kept character's index."""
    kept: list[str] = []
    where: list[int] = []
    space = False
    for index, char in enumerate(text):
        if char.isspace():
            if not space and kept:
                kept.append(" ")
                where.append(index)
            space = True
            continue
        space = False
        kept.append(char)
        where.append(index)
    return "".join(kept), where


def locate(quote: str, text: str) -> int | None:
    """Where ``quote`` begins in ``text`` (the same words; runs of whitespace count as one
    space), or None."""
    exact = text.find(quote)
    if exact >= 0:
        return exact
    wanted = " ".join(quote.split())
    if not wanted:
        return None
    flat, where = _collapsed(text)
    at = flat.find(wanted)
    return where[at] if at >= 0 else None


def closest_passage(quote: str, text: str) -> str:
    """The passage of ``text`` most like ``quote`` (rapidfuzz's best partial alignment),
    on one line and at most ``_CLOSEST_CHARS`` characters; empty for an empty text."""
    if not text.strip():
        return ""
    aligned = fuzz.partial_ratio_alignment(quote, text) if len(quote) < len(text) else None
    passage = text if aligned is None else text[aligned.dest_start : aligned.dest_end]
    return " ".join(passage.split())[:_CLOSEST_CHARS]


# -- the ledger -------------------------------------------------------------------------------


def _ledger_state(read: ReadBundle, settings: Settings) -> tuple[LedgerState, str]:
    """Whether the configured ledger (there is one) holds the bundle's plan ids and
    receipt digests."""
    from ..storage import open_ledger

    configured = settings.ledger

    admission = read.bundle.admission
    wanted = (*admission.plan_ids, *admission.receipt_digests)
    if not wanted:
        return "not_held", "the bundle names no plan"
    target = configured.url if configured.url is not None else configured.path
    assert target is not None
    try:
        with open_ledger(target, create=False) as ledger:
            held = sum(ledger.has_record(digest) for digest in wanted)
    except LedgerError as exc:
        return "unavailable", f"the ledger could not be read: {exc.reason}"
    if held == len(wanted):
        return "held", f"the ledger holds its {len(admission.plan_ids)} plan id(s) and receipts"
    if held == 0:
        return "not_held", "the ledger holds none of the bundle's plan ids or receipts"
    return "partly_held", f"the ledger holds {held} of its {len(wanted)} plan ids and receipts"
