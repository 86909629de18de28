"""Keyed web-search APIs (Brave, Tavily): what they share.

The key is read from the environment variable ``api_key_env`` names, at the moment a request
is sent; it travels only in a request header, and is never stored on a model, logged,
recorded or put into an error. A missing variable is no readiness failure: the adapter keeps
its rank, its attempt fails as ``misconfigured`` (``api_key_missing``) and the gateway fails
over. Provider answers map onto the reasons vocabulary: 401/403/422 (a bad or missing key, a
refused request) are ``misconfigured``; 429 is ``transient``, retried once when its
``Retry-After`` fits in the question's deadline; 5xx is ``transient``. Every hit's page is
then fetched and analysed like a SearXNG hit's (``harvest_pages``).
"""

from __future__ import annotations

import asyncio
import email.utils
import os
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from typing import ClassVar

from pydantic import Field, JsonValue

from ..errors import UpstreamStatus
from ..models import AttemptCause, Evidence, ExternalQueryPlan, ProviderType
from ..net._fetch import ApiResponse
from ..text._credentials import SECRET_IN_RESULT, repeats_credential
from ._base import Adapter, AdapterOutcome, EndpointClient
from ._pages import DEADLINE_MARGIN_S, SearchHit, gather_deadline, harvest_pages
from .options import Endpoints

__all__ = [
    "MAX_QUERIES",
    "Found",
    "KeyedSearchAdapter",
    "interleave",
    "published_date",
    "region_of",
    "web_results",
]

#: Searches per question (one per planned query, compare targets first).
MAX_QUERIES = 4


@dataclass(frozen=True)
class Found:
    """One search result: the hit whose page is fetched, or, when the provider already
    handed over the page's text, that text as evidence instead."""

    hit: SearchHit
    evidence: tuple[Evidence, ...] = ()


def published_date(value: JsonValue) -> date | None:
    """A provider's publication date: ISO 8601 (``2026-11-20``, ``2026-11-20T08:00:00Z``)
    or an RFC 2822 date (``Fri, 20 Nov 2026 08:00:00 GMT``); None for anything else."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).date()
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(text).date()
    except (TypeError, ValueError):
        return None


def region_of(language: str) -> str | None:
    """The region subtag of a BCP 47 tag (``zh-TW`` → ``TW``), if it has one."""
    for part in language.split("-")[1:]:
        if len(part) == 2 and part.isalpha():
            return part.upper()
    return None


def web_results(results: JsonValue) -> Iterator[tuple[dict[str, JsonValue], str]]:
    """Each result object of a provider's list with its http(s) ``url``; anything else (a
    non-object, a missing or non-web URL) is skipped."""
    for item in results if isinstance(results, list) else ():
        if isinstance(item, dict):
            url = item.get("url")
            if isinstance(url, str) and url.startswith(("http://", "https://")):
                yield item, url


def interleave(groups: Sequence[Sequence[SearchHit]]) -> list[SearchHit]:
    """Round-robin across queries so every query (compare target) gets pages fetched."""
    merged: list[SearchHit] = []
    for position in range(max((len(group) for group in groups), default=0)):
        merged.extend(group[position] for group in groups if position < len(group))
    return merged


def _retry_fits(wait: float) -> bool:
    """Whether waiting ``wait`` seconds still leaves the retry as much time as the wait (and
    the margin the page chain keeps) before the question's deadline."""
    deadline = gather_deadline.get()
    if deadline is None:
        return False
    remaining = deadline - asyncio.get_running_loop().time() - DEADLINE_MARGIN_S
    return wait <= remaining / 2


async def _with_retry(send: Callable[[], Awaitable[ApiResponse]]) -> ApiResponse:
    """``send()``; after a 429 that says how long to wait, once more when the wait fits."""
    try:
        return await send()
    except UpstreamStatus as exc:
        wait = exc.retry_after
        if exc.status != 429 or wait is None or not _retry_fits(wait):
            raise
    await asyncio.sleep(wait)
    return await send()


class KeyedSearchAdapter(Adapter):
    """A live-search API called with a key: subclasses say how to ask and how to read."""

    provider_type: ClassVar[ProviderType] = "live_search"
    supports_freshness: ClassVar[bool] = True
    supports_page_fetch: ClassVar[bool] = True

    class Options(Adapter.Options):
        #: The API root; the adapter appends its search path.
        base_url: str
        #: The environment variable holding the key (read at send time, never stored).
        api_key_env: str = Field(min_length=1)
        #: Results asked for per query (the provider's own cap applies).
        count: int = Field(default=10, ge=1, le=20)

        #: Options that shape the request, so a replay asks exactly what was recorded.
        replayed: ClassVar[tuple[str, ...]] = ("count",)

        def endpoints(self) -> Endpoints:
            return Endpoints({"base_url": self.base_url}, keep=self.replayed, key_env="api_key_env")

    options: Options

    def status_cause(self, status: int) -> AttemptCause:
        """A keyed API's statuses: 401 and 403 refuse the key (wrong, revoked, or not
        entitled to this endpoint: the variable ``api_key_env`` names holds it), 422 a
        parameter the API refuses; 404 (the base) a wrong ``base_url`` path."""
        if status in (401, 403):
            return AttemptCause(
                status=status, meaning="key_refused", setting=self.options.api_key_env
            )
        if status == 422:
            return AttemptCause(status=status, meaning="parameter_refused")
        return super().status_cause(status)

    @abstractmethod
    async def search(
        self, endpoint: EndpointClient, query: str, plan: ExternalQueryPlan, key: str
    ) -> ApiResponse:
        """Send one search for ``query`` with ``key``."""

    @abstractmethod
    def read(self, response: ApiResponse, query: str, plan: ExternalQueryPlan) -> list[Found]:
        """The results of one answer, in the provider's order."""

    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        variable = self.options.api_key_env
        key = os.environ.get(variable, "").strip()
        if not key:
            # Nothing is sent without a key: the answer names the variable to set.
            return AdapterOutcome(
                status="failed",
                reason="api_key_missing",
                failure="misconfigured",
                detail={"api_key_env": variable},
                cause=AttemptCause(meaning="api_key_missing", setting=variable),
            )
        endpoint = self.runtime.search_client(self.options.base_url)
        per_query: list[list[Found]] = []
        for query in plan.search_queries[:MAX_QUERIES]:
            try:
                response = await _with_retry(partial(self.search, endpoint, query, plan, key))
            except UpstreamStatus as exc:
                detail: dict[str, JsonValue] = {}
                if exc.retry_after is not None:
                    detail["retry_after_s"] = exc.retry_after
                return self.status_outcome(exc, **detail)
            per_query.append(self.read(response, query, plan))
        total = sum(len(found) for found in per_query)
        if total == 0:
            return AdapterOutcome(status="empty", reason="no_results")
        per_query = [[item for item in found if not _carries(item, key)] for found in per_query]
        dropped = total - sum(len(found) for found in per_query)
        if dropped == total:
            return _secret_outcome(total, dropped)
        given = [item for found in per_query for item in found if item.evidence]
        to_fetch = interleave([[f.hit for f in found if not f.evidence] for found in per_query])
        harvest = await harvest_pages(
            to_fetch,
            plan,
            adapter_id=self.adapter_id,
            provider_type=self.provider_type,
            runtime=self.runtime,
            credentials=(key,),
        )
        # A page can still repeat the key (its text, its title, where the browser ended up):
        # such evidence is dropped and counted like a hit that carried it.
        read = [item for item in harvest.evidence if not _repeats(item, key)]
        dropped += len(harvest.evidence) - len(read)
        evidence = (*(e for item in given for e in item.evidence), *read)
        if dropped:
            # Counted, never spelled: the audit learns that hits were dropped, not the key.
            return harvest.outcome(
                evidence,
                results=total,
                empty_reason="no_usable_pages",
                provider_texts=len(given),
                **{SECRET_IN_RESULT: dropped},
            )
        return harvest.outcome(
            evidence, results=total, empty_reason="no_usable_pages", provider_texts=len(given)
        )


def _carries(found: Found, key: str) -> bool:
    """Does a result repeat the key (its hit's URL, title or snippet, or any text the
    provider handed over with it)? Such a result is dropped before its page is fetched,
    stored, shown or audited."""
    texts = [found.hit.url, found.hit.title, found.hit.snippet]
    return repeats_credential(texts, (key,)) or any(_repeats(e, key) for e in found.evidence)


def _repeats(item: Evidence, key: str) -> bool:
    """Does one piece of evidence repeat the key (its URL, title, site or snippet)?"""
    return repeats_credential((item.url, item.title, item.snippet, item.site), (key,))


def _secret_outcome(total: int, dropped: int) -> AdapterOutcome:
    return AdapterOutcome(
        status="empty", reason=SECRET_IN_RESULT, results=total, detail={SECRET_IN_RESULT: dropped}
    )
