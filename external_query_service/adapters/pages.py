"""Search hits → page bodies → evidence: the body-evidence chain every search adapter shares.

Each hit's page is fetched through the safe fetcher (concurrently), decoded, extracted,
chunked and scored; its best snippets become ``page_body`` evidence. Once every page is in,
a second pass (``text.rerank``) scores the snippets again with term rarity counted over the
chunks of all the pages, and the evidence comes back best first across pages. When a page cannot be
fetched or has no main text, the hit's own search snippet stands in, marked
``search_snippet`` so the verifier and reader can tell. A URL the network policy refuses
yields nothing at all, and hosts outside the source policy are not fetched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, date, datetime
from urllib.parse import urlsplit

from ..adapters.base import AdapterRuntime, evidence_id
from ..digests import sha256_digest
from ..errors import BlockedDestination, ExtractionFailed, FetchError, UnsafeURL
from ..models import Evidence, ExternalQueryPlan, ProviderType
from ..sites import source_allowed
from ..text.analyse import analyse_page
from ..text.chunk import Chunk
from ..text.dates import find_dates
from ..text.rerank import Candidate, rerank
from ..text.score import TermStats, best_snippets

__all__ = [
    "DEADLINE_MARGIN_S",
    "PAGE_MIN_SCORE",
    "PageHarvest",
    "SearchHit",
    "gather_deadline",
    "harvest_pages",
]

#: A page (or a stand-in search snippet) counts only when its best chunk reaches this score.
#: The floor sits below the snippet ranker's default so that a page covering about a third of
#: a question's rarity-weighted terms still counts. On the DuReader questions of
#: bench/snippet_quality.py, 18 of 108 pages fall below it against their own question, and 13
#: of 324 pages reach it against an unrelated one.
PAGE_MIN_SCORE = 3000

#: The event-loop time by which the running adapter must be done. The gateway sets it
#: around each adapter call (the per-question deadline); page fetches still running shortly
#: before it are cancelled, so the pages already read are kept instead of the whole attempt
#: timing out.
gather_deadline: ContextVar[float | None] = ContextVar("gather_deadline", default=None)
#: Time left for the adapter to hand back what it has once the pages are cut off.
DEADLINE_MARGIN_S = 0.25


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
    fetched, failed, and why each failure happened."""

    evidence: tuple[Evidence, ...]
    fetched: int
    failed: int
    #: (url, reason) for every page that did not yield body evidence.
    failures: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class _Source:
    adapter_id: str
    provider_type: ProviderType


async def harvest_pages(
    hits: Sequence[SearchHit],
    plan: ExternalQueryPlan,
    *,
    adapter_id: str,
    provider_type: ProviderType,
    runtime: AdapterRuntime,
) -> PageHarvest:
    """Turn up to ``network.max_pages`` hits into evidence, fetching pages concurrently."""
    source = _Source(adapter_id, provider_type)
    chosen = _dedupe(hits)[: runtime.network.max_pages]
    tasks = [asyncio.ensure_future(_one(hit, plan, source, runtime)) for hit in chosen]
    deadline = gather_deadline.get()
    timeout = None
    if deadline is not None:
        timeout = max(0.0, deadline - asyncio.get_running_loop().time() - DEADLINE_MARGIN_S)
    try:
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
    finally:
        # On time (or when this gather is itself cancelled) nothing is left running.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    results = [
        _finished(task, hit, plan, source, runtime) for task, hit in zip(tasks, chosen, strict=True)
    ]
    evidence = [item for found, _, _ in results for item in found]
    stats = sum((page_stats for _, _, page_stats in results), TermStats())
    evidence = _best_first(evidence, plan, stats)
    failures = tuple(
        (hit.url, reason) for hit, (_, reason, _) in zip(chosen, results, strict=True) if reason
    )
    fetched = sum(1 for _, reason, _ in results if reason is None)
    return PageHarvest(tuple(evidence), fetched, len(chosen) - fetched, failures)


#: What one hit yields: its evidence, why it has no body evidence (None when it has), and the
#: term statistics of the page's chunks (empty when the page was not read).
_PageResult = tuple[list[Evidence], str | None, TermStats]


def _best_first(
    evidence: list[Evidence], plan: ExternalQueryPlan, stats: TermStats
) -> list[Evidence]:
    """The second pass: every snippet re-scored over ``stats`` (all the pages' chunks), best
    first; equal scores keep the hits' order."""
    passages = [Candidate(item.snippet, item.gathered_for or plan.question) for item in evidence]
    return [
        evidence[ranked.index].model_copy(update={"score": ranked.score})
        for ranked in rerank(passages, stats, plan.targets)
    ]


def _finished(
    task: asyncio.Future[_PageResult],
    hit: SearchHit,
    plan: ExternalQueryPlan,
    source: _Source,
    runtime: AdapterRuntime,
) -> _PageResult:
    if task.cancelled():
        # Out of time: the page was not read; its search snippet stands in, as on failure.
        found = _snippet_evidence(hit, plan, source, runtime, min_score=PAGE_MIN_SCORE)
        return found, "deadline_exceeded", TermStats()
    return task.result()


async def _one(
    hit: SearchHit, plan: ExternalQueryPlan, source: _Source, runtime: AdapterRuntime
) -> _PageResult:
    host = (urlsplit(hit.url).hostname or "").lower()
    if not source_allowed(host, runtime.sources):
        # Not fetched: the snippet still goes to the verifier, which rejects it visibly.
        found = _snippet_evidence(hit, plan, source, runtime, min_score=0)
        return found, "source_policy", TermStats()
    try:
        page = await runtime.fetcher.fetch(hit.url)
        analysis = await runtime.analyses.run(
            analyse_page,
            page.body,
            url=page.final_url,
            declared_charset=page.charset,
            content_type=page.content_type,
            query=hit.query or plan.question,
            targets=plan.targets,
            min_score=PAGE_MIN_SCORE,
        )
    except (BlockedDestination, UnsafeURL) as exc:
        return [], exc.reason, TermStats()  # never a source, not even through its snippet
    except (FetchError, ExtractionFailed) as exc:
        found = _snippet_evidence(hit, plan, source, runtime, min_score=PAGE_MIN_SCORE)
        return found, exc.reason, TermStats()

    final_host = (urlsplit(page.final_url).hostname or host).lower()
    ref = runtime.store.put(
        analysis.text, source=page.final_url, metadata={"title": analysis.title or hit.title}
    )
    content_digest = sha256_digest(analysis.text)
    accessed_at = (page.fetched_at or runtime.clock()).astimezone(UTC)
    evidence = [
        Evidence(
            evidence_id=evidence_id(page.final_url, content_digest, scored.chunk.offset),
            adapter_id=source.adapter_id,
            provider_type=source.provider_type,
            basis="page_body",
            url=page.final_url,
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
        )
        for scored in analysis.snippets
    ]
    return evidence, None, analysis.stats


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
    content_digest = sha256_digest(text)
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
            site=(urlsplit(hit.url).hostname or "").lower(),
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
