"""Tavily (live_search): the search API → fetch each hit's page body → evidence.

Format: ``POST <base_url>/search`` with ``Authorization: Bearer <key>`` and the JSON
``{"query", "max_results", "search_depth": "basic", "topic": "general"|"news",
"time_range"?, "include_raw_content"?, "country"?}``; the answer's ``results[]`` carry
``title``, ``url``, ``content`` (a snippet), ``score`` and, when asked or known,
``raw_content`` and ``published_date``. A plan's time range asks for the smallest
``time_range`` bucket reaching back to its start; the verifier enforces the exact dates.

With ``use_provider_content = true`` the page text Tavily extracted (``raw_content``) is used
instead of fetching the page, as ``provider_text`` evidence: the verifier judges its web
URL like any search result's and the reader is told the text is the provider's extraction,
not read here. Results without it are fetched as usual.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, JsonValue

from ..models import Evidence, ExternalQueryPlan
from ..net._fetch import ApiResponse
from ..net._sites import url_host
from ._base import EndpointClient
from ._pages import PAGE_MIN_SCORE, SearchHit
from ._search_api import Found, KeyedSearchAdapter, published_date, web_results
from ._searxng import time_range_bucket
from ._text_evidence import TextItem, text_evidence

__all__ = [
    "DEFAULT_BASE_URL",
    "SEARCH_PATH",
    "TavilyAdapter",
]

DEFAULT_BASE_URL = "https://api.tavily.com"
SEARCH_PATH = "search"


class TavilyAdapter(KeyedSearchAdapter):
    """Live search through the Tavily API (``[[adapters]] kind = "tavily"``); pages fetched, or
    Tavily's own extracted text with ``use_provider_content``."""

    kind: ClassVar[str] = "tavily"

    class Options(KeyedSearchAdapter.Options):
        base_url: str = DEFAULT_BASE_URL
        api_key_env: str = Field(default="TAVILY_API_KEY", min_length=1)
        #: Use Tavily's own page text (``raw_content``) instead of fetching the page.
        use_provider_content: bool = False
        #: Tavily's ``country`` (a full English name, ``china``), general topic only.
        country: str | None = Field(default=None, min_length=2, max_length=60)
        replayed: ClassVar[tuple[str, ...]] = ("count", "country", "use_provider_content")

    options: Options

    async def search(
        self, endpoint: EndpointClient, query: str, plan: ExternalQueryPlan, key: str
    ) -> ApiResponse:
        topic = "news" if plan.query_kind == "news" else "general"
        body: dict[str, JsonValue] = {
            "query": query,
            "max_results": self.options.count,
            "search_depth": "basic",
            "topic": topic,
        }
        if plan.time_range is not None:
            bucket = time_range_bucket(plan.time_range.start, self.runtime.clock().date())
            if bucket is not None:
                body["time_range"] = bucket
        if self.options.use_provider_content:
            body["include_raw_content"] = True
        if self.options.country and topic == "general":
            body["country"] = self.options.country.lower()
        headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
        return await endpoint.post_json(SEARCH_PATH, body, headers=headers)

    def read(self, response: ApiResponse, query: str, plan: ExternalQueryPlan) -> list[Found]:
        data = response.data if isinstance(response.data, dict) else {}
        found = []
        for item, url in web_results(data.get("results")):
            title, content = item.get("title"), item.get("content")
            hit = SearchHit(
                url=url,
                title=title if isinstance(title, str) else "",
                snippet=content if isinstance(content, str) else "",
                published_at=published_date(item.get("published_date")),
                query=query,
                response_digest=response.raw_digest,
            )
            raw = item.get("raw_content")
            given: tuple[Evidence, ...] = ()
            if self.options.use_provider_content and isinstance(raw, str) and raw.strip():
                given = tuple(
                    text_evidence(
                        TextItem(
                            url=url,
                            title=hit.title,
                            text=raw,
                            query=query,
                            published_at=hit.published_at,
                            raw_digest=response.raw_digest,
                        ),
                        plan,
                        adapter_id=self.adapter_id,
                        provider_type=self.provider_type,
                        basis="provider_text",
                        site=url_host(url),
                        runtime=self.runtime,
                        min_score=PAGE_MIN_SCORE,
                    )
                )
            found.append(Found(hit, given))
        return found
