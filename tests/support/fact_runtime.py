"""Scaffolding for fact-API adapter tests: real trusted endpoints, no page fetching."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from external_query_service.adapters._base import Adapter, AdapterOutcome
from external_query_service.models import ExternalQueryPlan
from external_query_service.net._fetch import FetchedPage, TrustedEndpoint
from external_query_service.settings import NetworkSettings

T = TypeVar("T")


class NoFetcher:
    async def fetch(self, url: str) -> FetchedPage:
        raise AssertionError(f"a fact API adapter must not fetch pages: {url}")


class Endpoints:
    """Trusted endpoints made for one test, closed inside the loop that used them."""

    def __init__(self, network: NetworkSettings) -> None:
        self.network = network
        self.made: list[TrustedEndpoint] = []

    def __call__(self, base_url: str) -> TrustedEndpoint:
        endpoint = TrustedEndpoint(base_url, self.network)
        self.made.append(endpoint)
        return endpoint

    async def aclose(self) -> None:
        for endpoint in self.made:
            await endpoint.aclose()


def run(adapter: Adapter, work: Awaitable[T]) -> T:
    """Await ``work`` in a fresh loop, then close the endpoints it opened in that loop."""

    async def main() -> T:
        try:
            return await work
        finally:
            endpoints = adapter.runtime.endpoint
            assert isinstance(endpoints, Endpoints)
            await endpoints.aclose()

    return asyncio.run(main())


def gather(adapter: Adapter, plan: ExternalQueryPlan) -> AdapterOutcome:
    """What ``adapter`` gathers for ``plan``, its endpoints closed afterwards."""
    return run(adapter, adapter.gather(plan))
