"""Text a provider handed over → scored evidence, without fetching anything.

A documentation server's document (``doc_body``) and a search provider's own extraction of a
page (``provider_text``) arrive as text. They go through the same chunking and scoring as a
fetched page body, and their best snippets become evidence pointing into the stored text
(``store.quote(ref, offset, length) == snippet``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date

from .._digests import sha256_digest
from ..models import Evidence, EvidenceBasis, ExternalQueryPlan, ProviderType
from ..text._chunk import chunk_text
from ..text._dates import find_dates
from ..text._extract import normalize_text
from ..text._score import best_snippets
from ._base import AdapterRuntime, evidence_id

__all__ = [
    "MAX_SNIPPETS",
    "TextItem",
    "text_evidence",
]

#: Snippets kept per text, like a page's.
MAX_SNIPPETS = 2


@dataclass(frozen=True)
class TextItem:
    """One text as the provider gave it, and the address evidence will cite."""

    url: str
    title: str
    text: str
    #: The search query the text answered (scored against it); "" scores the question.
    query: str = ""
    published_at: date | None = None
    #: Digest of the provider's answer that carried the text.
    raw_digest: str = ""


def text_evidence(
    item: TextItem,
    plan: ExternalQueryPlan,
    *,
    adapter_id: str,
    provider_type: ProviderType,
    basis: EvidenceBasis,
    site: str,
    runtime: AdapterRuntime,
    min_score: int,
    metadata: Mapping[str, str] | None = None,
) -> list[Evidence]:
    """Up to ``MAX_SNIPPETS`` evidence from ``item`` scoring at least ``min_score`` (none
    when nothing does, or the text is empty once normalized)."""
    text = normalize_text(item.text)
    if not text:
        return []
    chunks = chunk_text(text)
    queries: Sequence[str] = (item.query,) if item.query else plan.search_queries
    # The query the text answers best decides the snippets (a text is not stitched together
    # from the best chunk of each query).
    found = [
        (query, best_snippets(chunks, query, plan.targets, limit=MAX_SNIPPETS, min_score=min_score))
        for query in queries
    ]
    query, snippets = max(found, key=lambda pair: pair[1][0].score if pair[1] else -1)
    if not snippets:
        return []
    stored = {"title": item.title, "basis": basis, **(metadata or {})}
    ref = runtime.store.put(text, source=item.url, metadata=stored)
    content_digest = sha256_digest(text)
    accessed_at = runtime.clock().astimezone(UTC)
    dated = "\n".join([item.title, *(scored.chunk.text for scored in snippets)])
    about = find_dates(dated, reference=item.published_at)
    return [
        Evidence(
            evidence_id=evidence_id(item.url, content_digest, scored.chunk.offset),
            adapter_id=adapter_id,
            provider_type=provider_type,
            basis=basis,
            url=item.url,
            title=item.title,
            site=site,
            snippet=scored.chunk.text,
            score=max(0, min(10_000, scored.score)),
            published_at=item.published_at,
            about_dates=about,
            accessed_at=accessed_at,
            content_digest=content_digest,
            raw_digest=item.raw_digest or content_digest,
            ref=ref,
            offset=scored.chunk.offset,
            length=scored.chunk.length,
            gathered_for=query or None,
        )
        for scored in snippets
    ]
