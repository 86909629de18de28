"""Brave Search (live_search): the Web Search API → fetch each hit's page body → evidence.

Format: ``GET <base_url>/web/search?q=&count=&search_lang=&country=&freshness=`` with the
key in ``X-Subscription-Token``; the answer's ``web.results[]`` carry ``title``, ``url``,
``description`` and, when known, ``page_age`` (ISO date-time) or ``age``. With a time range
in the plan the search asks for the smallest ``freshness`` bucket (``pd``/``pw``/``pm``/
``py``) reaching back to its start, or the explicit ``YYYY-MM-DDtoYYYY-MM-DD`` range from
the start to today when none does; the verifier still enforces the exact dates.
"""

from __future__ import annotations

import html
import re
from datetime import date
from typing import ClassVar

from pydantic import Field, JsonValue

from ..models import ExternalQueryPlan
from ..net._fetch import ApiResponse
from ._base import EndpointClient
from ._pages import SearchHit
from ._search_api import Found, KeyedSearchAdapter, published_date, region_of, web_results
from ._searxng import time_range_bucket

__all__ = [
    "DEFAULT_BASE_URL",
    "SEARCH_PATH",
    "BraveAdapter",
    "brave_freshness",
    "brave_language",
]

DEFAULT_BASE_URL = "https://api.search.brave.com/res/v1"
SEARCH_PATH = "web/search"
_FRESHNESS = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}
_TAG = re.compile(r"<[^<>]{0,200}>")


def brave_freshness(plan: ExternalQueryPlan, today: date) -> str | None:
    """The ``freshness`` parameter for ``plan`` (None: no filter)."""
    if plan.time_range is None:
        return None
    bucket = time_range_bucket(plan.time_range.start, today)
    if bucket is not None:
        return _FRESHNESS[bucket]
    return f"{plan.time_range.start.isoformat()}to{max(plan.time_range.end, today).isoformat()}"


def _plain(value: JsonValue) -> str:
    """A description as plain text: Brave marks the query's words with ``<strong>``."""
    return html.unescape(_TAG.sub("", value)) if isinstance(value, str) else ""


def brave_language(plan_language: str) -> str | None:
    """Brave's ``search_lang``: Chinese by script (``zh-hans``, or ``zh-hant`` for
    Taiwan, Hong Kong and Macau, or a ``Hant`` tag); other languages by their primary
    subtag; None for an undetermined language (every language)."""
    tag = plan_language.lower()
    if tag == "und":
        return None
    parts = tag.split("-")
    if parts[0] == "zh":
        traditional = "hant" in parts or any(p in ("tw", "hk", "mo") for p in parts[1:])
        return "zh-hant" if traditional else "zh-hans"
    return parts[0]


class BraveAdapter(KeyedSearchAdapter):
    """Live search through the Brave Search API (``[[adapters]] kind = "brave"``); pages fetched
    like SearXNG's."""

    kind: ClassVar[str] = "brave"

    class Options(KeyedSearchAdapter.Options):
        base_url: str = DEFAULT_BASE_URL
        api_key_env: str = Field(default="BRAVE_API_KEY", min_length=1)
        #: ``country`` when the plan's language names no region (``ALL``: no country).
        country: str | None = Field(default=None, pattern=r"^[A-Za-z]{2,3}$")
        replayed: ClassVar[tuple[str, ...]] = ("count", "country")

    options: Options

    async def search(
        self, endpoint: EndpointClient, query: str, plan: ExternalQueryPlan, key: str
    ) -> ApiResponse:
        params: dict[str, str | int] = {"q": query, "count": self.options.count}
        language = brave_language(plan.language)
        if language is not None:
            params["search_lang"] = language
        country = region_of(plan.language) or self.options.country
        if country:
            params["country"] = country.upper()
        freshness = brave_freshness(plan, self.runtime.clock().date())
        if freshness is not None:
            params["freshness"] = freshness
        headers = {"X-Subscription-Token": key, "Accept": "application/json"}
        return await endpoint.get_json(SEARCH_PATH, params, headers=headers)

    def read(self, response: ApiResponse, query: str, plan: ExternalQueryPlan) -> list[Found]:
        data = response.data if isinstance(response.data, dict) else {}
        web = data.get("web")
        results: JsonValue = web.get("results") if isinstance(web, dict) else None
        found = []
        for item, url in web_results(results):
            hit = SearchHit(
                url=url,
                title=_plain(item.get("title")),
                snippet=_plain(item.get("description")),
                published_at=published_date(item.get("page_age"))
                or published_date(item.get("age")),
                query=query,
                response_digest=response.raw_digest,
            )
            found.append(Found(hit))
        return found
