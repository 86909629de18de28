"""Search hits → page bodies → evidence: the body-evidence chain every search adapter shares.

The walk (its rules in ``page_walk.py``). Hits are tried in list order, ``network.max_pages``
at a time, through the safe fetcher; each page that fails frees its place for the next hit,
until ``max_pages`` pages were read, ``ATTEMPTS_PER_PAGE × max_pages`` fetches were started,
the list ran out, or the question's deadline is near. Stragglers do not set the latency: a
page still loading after another page was read, for as long again as the slowest read page
took (at least ``STRAGGLER_FLOOR_S``, at most ``STRAGGLER_GRACE_S``), frees its place (it
keeps loading); once ``max_pages`` pages were read the pages still in flight are cut off at
once, and once at least one was read and nothing is left to start the pages still loading
get ``STRAGGLER_GRACE_S`` more plus half the slowest read page's time, and are then
cut off. A page whose body has arrived is no straggler: its analysis is waited for, within
the question's deadline, unless its markup is over ``ANALYSIS_MARKUP_BUDGET``; such a heavy
page (a huge table, tens of thousands of attributes) is analysed only when no other page
was read, and is otherwise cut off (``cut_off:analysis``) without reaching a worker.
The replay of a recorded world walks by the record instead (``_replayed_walk``): the same
hits, each read or cut off as the recording's walk did, whatever the clock.
A read page is decoded, extracted, chunked and scored; its
best snippets become ``page_body`` evidence. A PDF is read page by page, and each snippet's
URL names its page (``…#page=3``, ``page_locator``). With ``[browser] mode`` on, an HTML
page is read again as the question's headless browser shows it (``browser/_chain.py``): in
``fallback`` one whose scripts must write its text (no main text, or too little, and a
``<script>``), in ``always`` every one; its evidence says ``rendered_by = "browser"``, and
the attempt's ``rendered`` detail lists each rendering and why it was made.

Every other page is recorded as ``url reason`` (``PageHarvest.failures``), by what it proved:

- ``not_a_document:<reason>``: the answer is not a readable document (a content type we do
  not read, over the byte cap raw or decoded — a decompression bomb —, a broken compressed
  body, a redirect loop or too many hops, a blocked destination, an unsafe URL, no main
  text). It contributes nothing, not even its search snippet.
- ``error_status:<status>``: the server answered with an error status. Nothing.
- ``not_recorded``: a replayed test world holds no recording for the page. Nothing.
- ``cut_off``: the response began but did not finish in time (a drip cut off by a deadline,
  a body broken off mid-way), or the page was still loading when its straggler grace ran
  out. Nothing.
- ``cut_off:analysis``: the body arrived, but the page was still waiting for its analysis
  or in it when the walk ended (enough pages read, a heavy page once another was read, the
  deadline). Nothing.
- ``no_response:<reason>``: no answer at all (connection refused or reset before a status
  line, name not resolved, deadline before any response, host's circuit open). Its search
  snippet may stand in (``basis=search_snippet``), but only when no hit of the same search
  query gave page-body evidence.
- ``source_policy``: a host outside the source policy is not fetched (and is no attempt);
  its snippet still goes to the verifier, which rejects it visibly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Literal
from urllib.parse import urlsplit

from pydantic import JsonValue

from .._evidence_store import ref_digest
from .._memo import Digested
from ..browser._chain import QuestionBrowser, question_browser, wants_rendering
from ..errors import (
    BlockedDestination,
    BrowserUnavailable,
    ContentTooLarge,
    ExtractionFailed,
    FetchError,
    NotRecorded,
    RenderFailed,
    TooManyRedirects,
    UnsafeURL,
    UnsupportedContent,
    UpstreamStatus,
)
from ..models import (
    AdapterOutcome,
    AttemptCause,
    Evidence,
    ExternalQueryPlan,
    PageCause,
    ProviderType,
)
from ..net._fetch import FetchedPage
from ..net._sites import source_allowed
from ..observability._tracing import span
from ..text._analyse import PageAnalysis, analyse_page
from ..text._chunk import Chunk
from ..text._credentials import SECRET_IN_RESULT, repeats_credential
from ..text._currencies import currency_aliases, currency_code
from ..text._dates import find_dates
from ..text._parts import question_parts
from ..text._rerank import Candidate, answered, rerank
from ..text._score import TermStats, best_snippets, pages_stats
from ._base import AdapterRuntime, evidence_id
from ._page_walk import (
    CUT_OFF,
    CUT_OFF_ANALYSIS,
    STRAGGLER_FLOOR_S,
    STRAGGLER_GRACE_S,
    WALK_READ,
    HeldPages,
    PageWalk,
    WalkRecord,
    markup_units,
    straggler_patience,
)

__all__ = [
    "ATTEMPTS_PER_PAGE",
    "DEADLINE_MARGIN_S",
    "PAGE_MIN_SCORE",
    "STRAGGLER_FLOOR_S",
    "STRAGGLER_GRACE_S",
    "PageHarvest",
    "SearchHit",
    "gather_deadline",
    "harvest_pages",
    "page_cause",
    "page_locator",
    "straggler_patience",
]

#: A page (or a stand-in search snippet) counts only when its best chunk reaches this score.
#: The floor sits below the snippet ranker's default so that a page covering about a third of
#: a question's rarity-weighted terms still counts. On the DuReader questions of
#: bench/snippet_quality.py, 18 of 108 pages fall below it against their own question, and 13
#: of 324 pages reach it against an unrelated one.
PAGE_MIN_SCORE = 3000

#: Page fetches one walk may start per page it wants: hostile or broken results cannot
#: hide the good ones behind them, and cannot make the walk fetch the whole list either.
ATTEMPTS_PER_PAGE = 2

#: The event-loop time by which the running adapter must be done. The gateway sets it
#: around each adapter call (the per-question deadline); page fetches still running shortly
#: before it are ended, so the pages already read are kept instead of the whole attempt
#: timing out.
gather_deadline: ContextVar[float | None] = ContextVar("gather_deadline", default=None)
#: Time left for the adapter to hand back what it has once the page fetches are cut off.
DEADLINE_MARGIN_S = 0.25
#: Of that margin, how long a page already read may still spend in analysis.
_ANALYSIS_GRACE_S = 0.15

_NOT_A_DOCUMENT = "not_a_document"
_NOT_DOCUMENTS = (
    UnsafeURL,
    BlockedDestination,
    TooManyRedirects,
    ContentTooLarge,
    UnsupportedContent,
)


@dataclass(frozen=True)
class SearchHit:
    """One result of a search engine, before its page is fetched."""

    url: str
    title: str
    snippet: str
    published_at: date | None = None
    #: The query this hit answered (scored against it).
    query: str = ""
    #: Digest of the search response that listed the hit.
    response_digest: str = ""
    #: When that response was really fetched, if it was replayed from the response cache.
    accessed_at: datetime | None = None


@dataclass(frozen=True)
class PageHarvest:
    """What the page chain made of a list of hits: body evidence, and how many pages were
    read, failed, and why each failure happened."""

    evidence: tuple[Evidence, ...]
    #: Pages read (body fetched, main text extracted), whether or not a chunk scored.
    fetched: int
    failed: int
    #: (url, reason) for every hit the walk reached that was not read (module docstring).
    failures: tuple[tuple[str, str], ...]
    #: Page body bytes received from the network, unusable pages included (pages replayed
    #: from the response cache count nothing).
    bytes_fetched: int = 0
    #: (url, why and what came of it) for every page rendered in the browser.
    renderings: tuple[tuple[str, str], ...] = ()

    def outcome(
        self,
        evidence: tuple[Evidence, ...],
        *,
        results: int,
        empty_reason: str,
        **detail: JsonValue,
    ) -> AdapterOutcome:
        """The adapter's outcome around this harvest: ``evidence`` (the harvest's, and any the
        adapter had already), ``ok`` when there is some (else ``empty`` with
        ``empty_reason``), this harvest's page counts, and its failures listed for the audit
        (``page_failures``; and ``rendered``, the pages rendered in the browser and why,
        when there were any) before the adapter's own ``detail``. With no evidence, and every
        page failed for one cause the answer can name (``page_cause``), that cause."""
        rendered: dict[str, JsonValue] = {
            "rendered": [f"{url} {why}" for url, why in self.renderings]
        }
        return AdapterOutcome(
            status="ok" if evidence else "empty",
            reason=None if evidence else empty_reason,
            evidence=evidence,
            results=results,
            pages_fetched=self.fetched,
            pages_failed=self.failed,
            bytes_fetched=self.bytes_fetched,
            detail={
                "page_failures": [f"{url} {why}" for url, why in self.failures],
                **(rendered if self.renderings else {}),
                **detail,
            },
            cause=None if evidence or self.fetched else page_cause(self.failures),
        )


#: Page failure records (``PageHarvest.failures``) an outcome's one cause is made of: the
#: network policy refused the URL (a port public hosts may not use, credentials in it) or the
#: address it resolved to; the page's host name did not resolve.
_PAGE_CAUSES: dict[str, PageCause] = {
    f"{_NOT_A_DOCUMENT}:unsafe_url": "address_policy",
    f"{_NOT_A_DOCUMENT}:blocked_destination": "address_policy",
    "no_response:resolve_failed": "resolve_failed",
}
#: What lets pages the address policy refused through: listing their networks (a listed
#: network may also use any port).
_POLICY_SETTING = "[network] allowed_networks"


def page_cause(failures: Sequence[tuple[str, str]]) -> AttemptCause | None:
    """The one cause every failed page shares, when there is one the answer can name (the
    address policy refused them; their host names did not resolve), with the pages' hosts
    and, for the policy, the setting to change; None for no failures or mixed ones."""
    causes = {_PAGE_CAUSES.get(why) for _url, why in failures}
    if len(causes) != 1 or None in causes:
        return None
    (cause,) = causes
    return AttemptCause(
        pages=cause,
        setting=_POLICY_SETTING if cause == "address_policy" else None,
        hosts=tuple(dict.fromkeys(host for url, _why in failures if (host := _host(url)))),
    )


@dataclass(frozen=True)
class _Source:
    adapter_id: str
    provider_type: ProviderType
    #: Secrets no redirect hop may repeat (the keyed provider's key; none for others).
    credentials: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Read:
    """What one hit gave: ``failure`` None means its page was read."""

    evidence: tuple[Evidence, ...] = ()
    failure: str | None = None
    #: No answer at all: the hit's search snippet may stand in.
    stand_in: bool = False
    #: Term statistics of the page's chunks (empty when the page was not read).
    stats: TermStats = field(default_factory=TermStats)
    #: Body bytes received from the network for this hit (0 for a kept reply).
    received: int = 0
    #: Why the page was rendered in the browser and what came of it (None: not rendered).
    rendered: str | None = None


async def harvest_pages(
    hits: Sequence[SearchHit],
    plan: ExternalQueryPlan,
    *,
    adapter_id: str,
    provider_type: ProviderType,
    runtime: AdapterRuntime,
    credentials: tuple[str, ...] = (),
) -> PageHarvest:
    """Walk ``hits`` in order until ``network.max_pages`` pages are read (module docstring).

    With ``credentials`` (a keyed provider's key), a redirect hop that repeats one in any
    form (``repeats_credential``) is never requested: the page fails as
    ``not_a_document:secret_in_result`` and neither the hop nor its reply is kept anywhere.

    One walk per call, so the budget is per gather, not per search query: at most
    ``max_pages`` pages read and ``ATTEMPTS_PER_PAGE × max_pages`` fetches started in all,
    however many queries the plan searched. A search adapter interleaves its queries' hits
    round-robin before calling this, so every query's best hits are tried first and they
    share the budget. Snippet stand-ins are judged per search query (``SearchHit.query``):
    a query with page-body evidence gets none. At most ``max_pages`` fetches run at once
    (under the fetcher's own global and per-host limits); every fetch ends by the question's
    deadline (``gather_deadline``) less ``DEADLINE_MARGIN_S``, and no new one starts then.
    Pages still in flight once ``max_pages`` pages are read are cut off then (``cut_off``
    while loading, ``cut_off:analysis`` once their body arrived); once the walk has what it
    can get short of that, pages still loading after ``straggler_grace`` and heavy pages at
    once (``page_walk.py``).
    """
    source = _Source(adapter_id, provider_type, credentials)
    candidates = _dedupe(hits)
    reads = await _walk(candidates, plan, source, runtime)
    with_bodies = {
        hit.query for hit, read in reads if any(e.basis == "page_body" for e in read.evidence)
    }
    evidence: list[Evidence] = []
    # Each evidence's hit's place among the hits the walk judged, in the engine's order: a
    # page cut off before it was read (``cut_off``, ``cut_off:analysis``) does not push the
    # pages after it down; one read and found wanting does.
    ranks: list[int] = []
    rank = 0
    for hit, read in reads:
        evidence.extend(read.evidence)
        if read.stand_in and hit.query not in with_bodies:
            evidence.extend(_snippet_evidence(hit, plan, source, runtime, min_score=PAGE_MIN_SCORE))
        ranks += [rank] * (len(evidence) - len(ranks))
        if not (read.failure or "").startswith("cut_off"):
            rank += 1
    stats = pages_stats((read.stats, [e.snippet for e in read.evidence]) for _, read in reads)
    evidence = await _best_first(evidence, ranks, plan, stats, semantic=runtime.semantic)
    failures = tuple((hit.url, read.failure) for hit, read in reads if read.failure)
    received = sum(read.received for _, read in reads)
    renderings = tuple((hit.url, read.rendered) for hit, read in reads if read.rendered)
    return PageHarvest(
        tuple(evidence), len(reads) - len(failures), len(failures), failures, received, renderings
    )


async def _best_first(
    evidence: list[Evidence],
    ranks: list[int],
    plan: ExternalQueryPlan,
    stats: TermStats,
    *,
    semantic: bool = False,
) -> list[Evidence]:
    """The second pass: every snippet ranked over ``stats`` (all the pages' chunks, a copied
    page's once: ``pages_stats``) by the answerability judgment and the fitted ranker
    (``ranks``: each snippet's hit's place in the walk, the search engine's order, a hint
    the ranker weighs), best first; equal scores keep the hits' order. None at all when the
    answerability judgment finds that the snippet ranked first does not answer
    (``text._rerank.answered``): quotes that only mention the question are no evidence (the
    outcome is then ``insufficient_evidence / no_matching_evidence``).

    With ``semantic`` (``[answerability] semantic``) the judgment is the semantic one, whose
    model reads the question and the first snippet, about 0.6 s of CPU: the pass then runs
    in a thread, so the event loop goes on serving the other questions' network and
    verification meanwhile (the default pass, a millisecond or two, stays on the loop)."""
    passages = [
        Candidate(
            item.snippet,
            item.gathered_for or plan.question,
            title=item.title,
            page=rank,
            offset=item.offset,
        )
        for item, rank in zip(evidence, ranks, strict=True)
    ]
    # A news question asks for reports about its target in its time range: any such report
    # answers it, and the verifier's target and time checks judge that.
    parts = plan.compare_targets or _question_parts(plan.question)
    judged = plan.query_kind != "news"
    spellings = _spellings(plan)
    if semantic and judged:
        ranked = await asyncio.to_thread(
            rerank,
            passages,
            stats,
            plan.targets,
            parts=parts,
            spellings=spellings,
            judged=judged,
            semantic=True,
        )
    else:
        ranked = rerank(
            passages, stats, plan.targets, parts=parts, spellings=spellings, judged=judged
        )
    if not answered(ranked, judged=judged):
        return []
    return [evidence[item.index].model_copy(update={"score": item.score}) for item in ranked]


def _spellings(plan: ExternalQueryPlan) -> dict[str, tuple[str, ...]]:
    """The names each target goes by, for the answerability judgment: an exchange-rate
    plan's currencies by every unambiguous CLDR name (the verifier's target check reads
    them so too); other targets only by themselves, so none is given."""
    if plan.query_kind != "exchange_rate":
        return {}
    codes = {target: currency_code(target) for target in plan.targets}
    return {target: currency_aliases(code) for target, code in codes.items() if code}


def _question_parts(question: str) -> tuple[str, ...]:
    """The parts a question asks (``text._parts``: 比亚迪 and 特斯拉 in
    ``2025年比亚迪和特斯拉的销量分别是多少``, or each of its question sentences), named as a
    comparison names its targets: a passage about one of them answers its part."""
    return tuple(part.text for part in question_parts(question))


async def _walk(
    candidates: Sequence[SearchHit],
    plan: ExternalQueryPlan,
    source: _Source,
    runtime: AdapterRuntime,
) -> list[tuple[SearchHit, _Read]]:
    """Every hit the walk reached, in list order, with what it gave: by the walk's rules
    (``_timed_walk``), or as a recorded world's walk over the same hits ended
    (``_replayed_walk``). The ``walk_observer`` is told how it ended."""
    urls = [hit.url for hit in candidates]
    recorded = runtime.recorded_walks
    fates = None if recorded is None else recorded.take(source.adapter_id, urls)
    if fates is None:
        reads = await _timed_walk(candidates, plan, source, runtime)
    else:
        reads = await _replayed_walk(candidates, fates, plan, source, runtime)
    if runtime.walk_observer is not None:
        ended = tuple(read.failure or WALK_READ for _hit, read in reads)
        runtime.walk_observer(WalkRecord(source.adapter_id, tuple(urls), ended))
    return reads


async def _replayed_walk(
    candidates: Sequence[SearchHit],
    fates: Sequence[str],
    plan: ExternalQueryPlan,
    source: _Source,
    runtime: AdapterRuntime,
) -> list[tuple[SearchHit, _Read]]:
    """The walk of a recorded world, by its record instead of the clock: the hits the
    recording reached (the first ``len(fates)``), no others; a page it cut off while loading
    is cut off unfetched, one it cut off in analysis is fetched and not analysed, and every
    other page is fetched and analysed and waited for (within the question's deadline, by no
    grace), at most ``max_pages`` fetches at once."""
    deadline = gather_deadline.get()
    fetch_by = None if deadline is None else deadline - DEADLINE_MARGIN_S
    places = asyncio.Semaphore(runtime.network.max_pages)

    async def replay(hit: SearchHit, fate: str) -> _Read:
        if not source_allowed(_host(hit.url), runtime.sources):
            found = _snippet_evidence(hit, plan, source, runtime, min_score=0)
            return _Read(tuple(found), "source_policy")
        if fate == CUT_OFF:
            return _Read(failure=CUT_OFF)
        async with places:
            outcome = await _fetch(hit, runtime, fetch_by, source.credentials)
        if isinstance(outcome, _Read):
            return outcome
        if fate == CUT_OFF_ANALYSIS:
            return _Read(failure=CUT_OFF_ANALYSIS, received=outcome.received)
        return await _analyse(hit, outcome, plan, source, runtime, fetch_by)

    reached = list(zip(candidates, fates, strict=False))
    tasks = [asyncio.create_task(replay(hit, fate)) for hit, fate in reached]
    try:
        # Not cancelled on a failure of one (a bug, a recording over its cap): the fetches in
        # flight end within their own deadlines (see ``_timed_walk``).
        if tasks:
            await asyncio.wait(tasks)
    finally:
        # Only when the walk is itself cancelled is anything still running here.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return [(hit, task.result()) for (hit, _fate), task in zip(reached, tasks, strict=True)]


async def _timed_walk(
    candidates: Sequence[SearchHit],
    plan: ExternalQueryPlan,
    source: _Source,
    runtime: AdapterRuntime,
) -> list[tuple[SearchHit, _Read]]:
    """Every hit the walk reached, in list order, with what it gave: ``PageWalk`` decides,
    this runs each hit's fetch and then its analysis as tasks and tells it what happened."""
    loop = asyncio.get_running_loop()
    deadline = gather_deadline.get()
    fetch_by = None if deadline is None else deadline - DEADLINE_MARGIN_S
    wanted = runtime.network.max_pages
    walk = PageWalk(
        wanted,
        ATTEMPTS_PER_PAGE * wanted,
        fetch_by=fetch_by,
        stop_at=None if fetch_by is None else fetch_by + _ANALYSIS_GRACE_S,
    )
    upcoming = iter(enumerate(candidates))
    reads: dict[int, _Read] = {}
    # Each hit's task: its fetch (the body _Arrived, or the _Read of a failure), then its
    # analysis (a _Read).
    running: dict[asyncio.Task[_Read | _Arrived], int] = {}
    arrivals: dict[int, _Arrived] = {}  # pages whose body is in hand
    cut: dict[asyncio.Task[_Read | _Arrived], int] = {}  # pages cut off while still loading

    def start_more() -> None:
        while walk.may_start(loop.time()):
            index, hit = next(upcoming, (-1, None))
            if hit is None:
                walk.ran_out()
                return
            if not source_allowed(_host(hit.url), runtime.sources):
                # Not fetched: the snippet still goes to the verifier, which rejects it visibly.
                found = _snippet_evidence(hit, plan, source, runtime, min_score=0)
                reads[index] = _Read(tuple(found), "source_policy")
                continue
            running[asyncio.create_task(_fetch(hit, runtime, fetch_by, source.credentials))] = index
            walk.started(index, loop.time())

    def analyse(index: int) -> None:
        hit, arrived = candidates[index], arrivals[index]
        running[asyncio.create_task(_analyse(hit, arrived, plan, source, runtime, fetch_by))] = (
            index
        )

    try:
        start_more()
        while running or walk.held:
            if walk.enough():
                break
            walk.settle(loop.time())
            for index in walk.cut_loading(loop.time()):
                task = next(task for task, at in running.items() if at == index)
                task.cancel()
                cut[task] = running.pop(task)
            fate = walk.held_pages()
            if fate is HeldPages.CUT_OFF:
                break  # a page was read: the heavy pages would only hold the answer
            if fate is HeldPages.ANALYSE:
                for index in walk.release():
                    analyse(index)
            if not running:
                break
            wake = walk.wake_at()
            done, _ = await asyncio.wait(
                set(running),
                timeout=None if wake is None else max(0.0, wake - loop.time()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not done:
                if walk.out_of_time(loop.time()):
                    break
                walk.demote(loop.time())
            for task in done:
                index = running.pop(task)
                outcome = task.result()
                if isinstance(outcome, _Arrived):
                    arrivals[index] = outcome
                    if walk.arrived(
                        index, markup_units(outcome.page.body, outcome.page.content_type)
                    ):
                        analyse(index)
                    continue
                reads[index] = outcome
                walk.finished(index, read=outcome.failure is None, now=loop.time())
            start_more()
    except Exception:
        # Not a page failure (a bug, a recording over its cap): the fetches in flight end
        # within their own deadlines before it propagates. Cancelling them mid-connection
        # was seen to leave a socket unclosed (a ResourceWarning in a later test).
        if running:
            await asyncio.wait(set(running))
        raise
    finally:
        # On time (or when the walk is itself cancelled) nothing is left running.
        for task in running:
            task.cancel()
        await asyncio.gather(*running, *cut, return_exceptions=True)

    def dropped(index: int) -> _Read:
        # Not done by the deadline, by the straggler grace, or once the answer could be
        # formed: nothing is known about its answer, so not even its snippet is trusted.
        arrived = arrivals.get(index)
        return _Read(failure=walk.dropped(index), received=arrived.received if arrived else 0)

    for task, index in (*running.items(), *cut.items()):
        # One that finished as it was cut off counts, if it got as far as a verdict.
        result = None if task.cancelled() else task.result()
        reads[index] = result if isinstance(result, _Read) else dropped(index)
    for index in walk.held:
        reads[index] = dropped(index)
    return [(candidates[index], reads[index]) for index in sorted(reads)]


@dataclass(frozen=True)
class _Arrived:
    """A page whose body is in hand, before its analysis."""

    page: FetchedPage
    #: Body bytes received from the network (0 for a kept reply).
    received: int


async def _fetch(
    hit: SearchHit,
    runtime: AdapterRuntime,
    fetch_by: float | None,
    credentials: tuple[str, ...] = (),
) -> _Read | _Arrived:
    """One hit's page body, or what its failed fetch proved about the page. With
    ``credentials``, every redirect hop is checked before it is requested."""
    refused: list[bool] = []

    def hop_allowed(hop: str) -> bool:
        carries = repeats_credential((hop,), credentials)
        refused.append(carries)
        return not carries

    try:
        with span("page_fetch", host=_host(hit.url)):
            page = await runtime.fetcher.fetch(
                hit.url, deadline=fetch_by, allow_redirect=hop_allowed if credentials else None
            )
    except FetchError as exc:
        if any(refused):
            # Only the reason: the exception's message names the hop, and so the key.
            return _Read(failure=f"{_NOT_A_DOCUMENT}:{SECRET_IN_RESULT}")
        return _fetch_failure(exc)
    return _Arrived(page, len(page.body) if page.fetched_at is None else 0)


async def _analyse(
    hit: SearchHit,
    arrived: _Arrived,
    plan: ExternalQueryPlan,
    source: _Source,
    runtime: AdapterRuntime,
    fetch_by: float | None,
) -> _Read:
    """An arrived page analysed (rendered in the question's browser first, or after its
    fetched body gave no text, when ``wants_rendering`` says so)."""
    page, received = arrived.page, arrived.received
    browser = question_browser.get()
    mode = browser.mode if browser is not None else "off"
    why = wants_rendering(mode, page, None)
    if why is None:
        try:
            analysis = await _analysed(page, hit, plan, runtime)
        except ExtractionFailed as exc:
            why = wants_rendering(mode, page, exc.reason)
            if why is None or browser is None:
                return _Read(failure=f"{_NOT_A_DOCUMENT}:{exc.reason}", received=received)
        else:
            evidence = _body_evidence(hit, page, analysis, source, runtime)
            return _Read(evidence, stats=analysis.stats, received=received)
    assert browser is not None  # wants_rendering names nothing with the browser off
    return await _rendered_read(hit, plan, source, runtime, page, browser, why, fetch_by)


async def _rendered_read(
    hit: SearchHit,
    plan: ExternalQueryPlan,
    source: _Source,
    runtime: AdapterRuntime,
    fetched: FetchedPage,
    browser: QuestionBrowser,
    why: str,
    fetch_by: float | None,
) -> _Read:
    """The page as the question's browser shows it, analysed; the rendering and why it was
    made go to the audit (``_Read.rendered``) whether or not it gave text."""
    received = len(fetched.body) if fetched.fetched_at is None else 0
    original = why.partition(":")[2] or "always"
    try:
        rendering = await browser.render(fetched.final_url, deadline=fetch_by)
    except (RenderFailed, BrowserUnavailable) as exc:
        reason = getattr(exc, "reason", "browser_unavailable")
        return _Read(
            failure=f"{_NOT_A_DOCUMENT}:{original}",
            received=received,
            rendered=f"{why} failed:{reason}",
        )
    note = f"{why} requests:{rendering.requests} refused:{len(rendering.refused)}"
    page = rendering.page
    try:
        analysis = await _analysed(page, hit, plan, runtime)
    except ExtractionFailed as exc:
        failure = f"{_NOT_A_DOCUMENT}:{exc.reason}"
        return _Read(failure=failure, received=received, rendered=f"{note} then:{exc.reason}")
    evidence = _body_evidence(hit, page, analysis, source, runtime, rendered_by="browser")
    return _Read(evidence, stats=analysis.stats, received=received, rendered=note)


async def _analysed(
    page: FetchedPage, hit: SearchHit, plan: ExternalQueryPlan, runtime: AdapterRuntime
) -> PageAnalysis:
    """``page`` decoded, extracted, chunked and scored (in the runtime's analysis memo)."""
    with span("page_analysis", host=_host(page.final_url), bytes=len(page.body)):
        analysis: PageAnalysis = await runtime.analyses.run(
            analyse_page,
            Digested(page.body, page.raw_digest),  # keyed by the digest the fetch made
            url=page.final_url,
            declared_charset=page.charset,
            content_type=page.content_type,
            query=hit.query or plan.question,
            targets=plan.targets,
            min_score=PAGE_MIN_SCORE,
            pdf_max_pages=runtime.network.max_pdf_pages,
        )
    return analysis


def _fetch_failure(exc: FetchError) -> _Read:
    """What a failed fetch proved about the page (module docstring)."""
    if isinstance(exc, _NOT_DOCUMENTS) or exc.reason == "decoding_failed":
        return _Read(failure=f"{_NOT_A_DOCUMENT}:{exc.reason}")
    if isinstance(exc, NotRecorded):
        return _Read(failure="not_recorded")
    if isinstance(exc, UpstreamStatus):
        return _Read(failure=f"error_status:{exc.status}")
    if exc.responded:
        return _Read(failure="cut_off")
    return _Read(failure=f"no_response:{exc.reason}", stand_in=True)


def _body_evidence(
    hit: SearchHit,
    page: FetchedPage,
    analysis: PageAnalysis,
    source: _Source,
    runtime: AdapterRuntime,
    *,
    rendered_by: Literal["browser"] | None = None,
) -> tuple[Evidence, ...]:
    final_host = _host(page.final_url) or _host(hit.url)
    ref = runtime.store.put(
        analysis.text, source=page.final_url, metadata={"title": analysis.title or hit.title}
    )
    content_digest = ref_digest(ref)  # the text's digest, which the store just made
    accessed_at = (page.fetched_at or runtime.clock()).astimezone(UTC)
    return tuple(
        Evidence(
            evidence_id=evidence_id(page.final_url, content_digest, scored.chunk.offset),
            adapter_id=source.adapter_id,
            provider_type=source.provider_type,
            basis="page_body",
            url=page_locator(page.final_url, analysis.page_at(scored.chunk.offset)),
            title=analysis.title or hit.title,
            site=final_host,
            snippet=scored.chunk.text,
            score=scored.score,
            published_at=analysis.published_at or hit.published_at,
            about_dates=analysis.about_dates,
            accessed_at=accessed_at,
            content_digest=content_digest,
            raw_digest=page.raw_digest,
            ref=ref,
            offset=scored.chunk.offset,
            length=scored.chunk.length,
            gathered_for=hit.query or None,
            rendered_by=rendered_by,
            requested_url=hit.url if hit.url != page.final_url else None,
        )
        for scored in analysis.snippets
    )


def page_locator(url: str, page: int | None) -> str:
    """Where a snippet is: ``url``, with ``#page=<n>`` for a snippet on page ``n`` of a PDF
    (the fragment PDF viewers open at)."""
    return url if page is None else f"{url.split('#', 1)[0]}#page={page}"


def _snippet_evidence(
    hit: SearchHit,
    plan: ExternalQueryPlan,
    source: _Source,
    runtime: AdapterRuntime,
    *,
    min_score: int,
) -> list[Evidence]:
    text = " ".join(hit.snippet.split())
    if not text:
        return []
    ref = runtime.store.put(text, source=hit.url, metadata={"title": hit.title, "basis": "search"})
    content_digest = ref_digest(ref)
    chunk = Chunk(offset=0, length=len(text), text=text)
    scored = best_snippets(
        [chunk], hit.query or plan.question, plan.targets, limit=1, min_score=min_score
    )
    if not scored:
        return []
    return [
        Evidence(
            evidence_id=evidence_id(hit.url, content_digest, 0),
            adapter_id=source.adapter_id,
            provider_type=source.provider_type,
            basis="search_snippet",
            url=hit.url,
            title=hit.title,
            site=_host(hit.url),
            snippet=text,
            score=scored[0].score,
            published_at=hit.published_at,
            about_dates=find_dates(f"{hit.title}\n{text}", reference=hit.published_at),
            accessed_at=(hit.accessed_at or runtime.clock()).astimezone(UTC),
            content_digest=content_digest,
            raw_digest=hit.response_digest or content_digest,
            ref=ref,
            offset=0,
            length=len(text),
            gathered_for=hit.query or None,
        )
    ]


def _dedupe(hits: Sequence[SearchHit]) -> list[SearchHit]:
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.url not in seen:
            seen.add(hit.url)
            kept.append(hit)
    return kept


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()
