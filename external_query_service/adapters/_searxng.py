"""SearXNG (live_search): search JSON → fetch each hit's page body → evidence.

Formats: a self-hosted instance's ``GET /search?q=..&format=json`` (``results[]`` with
``url``, ``title``, ``content``, ``publishedDate``). With a time range in the plan, the
search asks for the smallest ``time_range`` bucket that covers it; the verifier still
enforces the exact dates.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import ClassVar

from pydantic import JsonValue

from ..errors import FetchError, UpstreamStatus
from ..models import AttemptCause, ExternalQueryPlan, ProviderType, Readiness
from ._base import Adapter, AdapterOutcome
from ._pages import SearchHit, harvest_pages
from ._search_api import interleave
from .options import Endpoints

__all__ = ["SearxngAdapter", "time_range_bucket"]

#: SearXNG's ``time_range`` values and the most whole days before today each surely covers
#: ("week" is the past 7 × 24 h, so a range starting 7 calendar days ago needs "month").
#: Erring wide is safe: the verifier enforces the exact dates.
_BUCKETS = (("day", 0), ("week", 6), ("month", 27), ("year", 364))
_MAX_QUERIES = 4


def time_range_bucket(start: date, today: date) -> str | None:
    """The smallest bucket reaching back to ``start``; None when none does (no filter)."""
    lookback = (today - start).days
    for name, days in _BUCKETS:
        if lookback <= days:
            return name
    return None


def _language(plan_language: str) -> str:
    """SearXNG's ``language``: the plan's tag as given (``zh-TW`` stays ``zh-TW``); a bare
    ``zh`` reads as mainland Chinese, and an undetermined language searches every one."""
    if plan_language == "und":
        return "all"
    return "zh-CN" if plan_language.lower() == "zh" else plan_language


def _published(value: JsonValue) -> date | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).date()
    except ValueError:
        return None


class SearxngAdapter(Adapter):
    """Live web search through a SearXNG instance (``base_url``): hits become body evidence
    through the page chain, or snippet evidence when a page cannot be read."""

    kind: ClassVar[str] = "searxng"
    provider_type: ClassVar[ProviderType] = "live_search"
    supports_freshness: ClassVar[bool] = True
    supports_page_fetch: ClassVar[bool] = True

    class Options(Adapter.Options):
        #: Your instance (JSON output enabled). Unset: the adapter is not ready.
        base_url: str | None = None

        def endpoints(self) -> Endpoints:
            urls = {"base_url": self.base_url} if self.base_url else {}
            return Endpoints(urls, search="base_url")

    options: Options

    def readiness(self) -> Readiness:
        if not self.options.base_url:
            return Readiness(ready=False, reason="base_url_missing")
        return super().readiness()

    async def probe(self) -> Readiness:
        static = self.readiness()
        if not static.ready:
            return static
        assert self.options.base_url is not None
        # The first real call is a JSON search: prove that one is not refused (an instance
        # with JSON output disabled answers /config but refuses /search with 403).
        params: dict[str, str | int] = {"q": "searxng", "format": "json", "pageno": 1}
        endpoint = self.runtime.search_client(self.options.base_url)
        try:
            response = await endpoint.get_json("search", params)
        except UpstreamStatus as exc:
            return Readiness(ready=False, reason=f"upstream_status_{exc.status}")
        except FetchError as exc:
            return Readiness(ready=False, reason=exc.reason)
        data = response.data if isinstance(response.data, dict) else {}
        if _all_unresponsive(data):
            # A 200 with no results and every engine that ran timed out or was blocked: the
            # instance answers, but no question would find anything through it.
            return Readiness(ready=False, reason="engines_unresponsive")
        return Readiness(ready=True)

    def status_cause(self, status: int) -> AttemptCause:
        """SearXNG's own statuses: 403 on ``format=json`` is JSON output disabled (the
        instance's ``search.formats`` lacks ``json``); 400 a parameter it refuses; 404 (the
        base) a ``base_url`` path with no ``/search`` under it."""
        if status == 403:
            return AttemptCause(
                status=status, meaning="json_output_disabled", setting="search.formats"
            )
        if status == 400:
            return AttemptCause(status=status, meaning="parameter_refused")
        return super().status_cause(status)

    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        assert self.options.base_url is not None
        endpoint = self.runtime.search_client(self.options.base_url)
        params: dict[str, str | int] = {"format": "json", "language": _language(plan.language)}
        if plan.query_kind == "news":
            params["categories"] = "news"
        if plan.time_range is not None:
            bucket = time_range_bucket(plan.time_range.start, self.runtime.clock().date())
            if bucket:
                params["time_range"] = bucket

        per_query: list[list[SearchHit]] = []
        unresponsive: list[JsonValue] = []
        for query in plan.search_queries[:_MAX_QUERIES]:
            try:
                response = await endpoint.get_json("search", {**params, "q": query})
            except UpstreamStatus as exc:
                return self.status_outcome(exc)
            data = response.data if isinstance(response.data, dict) else {}
            hits = _hits(data.get("results"), query, response.raw_digest, response.fetched_at)
            per_query.append(hits)
            unresponsive.extend(_unresponsive(data.get("unresponsive_engines")))

        total = sum(len(hits) for hits in per_query)
        if total == 0 and unresponsive:
            # Nothing found because the engines did not answer: the backend is down, which is
            # not the same as nothing existing.
            return AdapterOutcome(
                status="failed",
                reason="engines_unresponsive",
                failure="transient",
                detail={"unresponsive_engines": unresponsive},
            )
        if total == 0:
            return AdapterOutcome(status="empty", reason="no_results")
        harvest = await harvest_pages(
            interleave(per_query),
            plan,
            adapter_id=self.adapter_id,
            provider_type=self.provider_type,
            runtime=self.runtime,
        )
        return harvest.outcome(
            harvest.evidence,
            results=total,
            empty_reason="no_usable_pages",
            unresponsive_engines=unresponsive,
        )


def _hits(
    results: JsonValue, query: str, digest: str, fetched_at: datetime | None = None
) -> list[SearchHit]:
    if not isinstance(results, list):
        return []
    hits = []
    for item in results:
        if not isinstance(item, dict):
            continue
        url = item.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            continue
        title = item.get("title")
        content = item.get("content")
        hits.append(
            SearchHit(
                url=url,
                title=title if isinstance(title, str) else "",
                snippet=content if isinstance(content, str) else "",
                published_at=_published(item.get("publishedDate")),
                query=query,
                response_digest=digest,
                accessed_at=fetched_at,
            )
        )
    return hits


def _all_unresponsive(data: dict[str, JsonValue]) -> bool:
    """Whether a SearXNG answer found nothing because its engines did not answer: no
    ``results`` and a non-empty ``unresponsive_engines`` (``[[engine, why], ...]``)."""
    results = data.get("results")
    return not results and bool(_unresponsive(data.get("unresponsive_engines")))


def _unresponsive(value: JsonValue) -> list[JsonValue]:
    if not isinstance(value, list):
        return []
    return [str(item[0]) for item in value if isinstance(item, list) and item]
