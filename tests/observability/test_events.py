"""Cache hits are events: the response cache and the analysis memo report each one, by
kind, as it happens, and the service fans them out to whoever subscribed."""

from __future__ import annotations

import asyncio
import logging

import pytest

from external_query_service._memo import ThreadMemo
from external_query_service.net._cache import ResponseCache
from external_query_service.net._fetch import HttpRuntime
from external_query_service.observability._events import CACHE_HIT_KINDS, CacheHits
from external_query_service.settings import CacheSettings
from external_query_service.testing import LoopbackServer, json_reply
from tests.support.http_cache import Clock, network, page, url


def test_every_listener_hears_each_hit_until_it_unsubscribes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hits = CacheHits()
    first: list[str] = []
    second: list[str] = []

    def broken(_kind: str) -> None:
        raise RuntimeError("listener bug")

    stop_first = hits.subscribe(first.append)
    hits.subscribe(broken)
    hits.subscribe(second.append)
    with caplog.at_level(logging.ERROR, logger="external_query_service.observability"):
        hits.hit("page")
    stop_first()
    stop_first()  # a second call is harmless
    hits.hit("analysis")
    assert first == ["page"]
    assert second == ["page", "analysis"]  # a failing listener does not stop the others
    assert "cache hit listener failed" in caplog.text
    assert set(CACHE_HIT_KINDS) == {"search", "api", "page", "analysis"}


def test_the_response_cache_reports_a_page_hit_only_when_a_kept_reply_is_used(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/kept", page("kept", **{"Cache-Control": "max-age=60"}))
    heard: list[str] = []
    cache = ResponseCache(CacheSettings(), clock=Clock(), on_hit=heard.append)
    runtime = HttpRuntime(network(), cache=cache, clock=Clock())

    async def twice() -> None:
        try:
            await runtime.fetcher.fetch(url(loopback, "/kept"))
            assert heard == []  # the first fetch went to the network
            await runtime.fetcher.fetch(url(loopback, "/kept"))
        finally:
            await runtime.aclose()

    asyncio.run(twice())
    assert heard == ["page"]
    assert cache.hits == 1


def test_an_engine_reply_is_a_search_hit_and_a_fact_api_reply_an_api_hit(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/engine/search", json_reply({"results": []}))
    loopback.route("/fx/latest", json_reply({"rates": {}}))
    heard: list[str] = []
    cache = ResponseCache(CacheSettings(), clock=Clock(), on_hit=heard.append)
    runtime = HttpRuntime(network(), cache=cache, clock=Clock())
    base = f"http://127.0.0.1:{loopback.port}"

    async def calls() -> None:
        try:
            for _ in range(2):
                await runtime.search_endpoint(f"{base}/engine").get_json("search")
                await runtime.endpoint(f"{base}/fx").get_json("latest")
        finally:
            await runtime.aclose()

    asyncio.run(calls())
    assert heard == ["search", "api"]
    assert runtime.search_endpoint(f"{base}/engine").kind == "search"
    assert runtime.endpoint(f"{base}/engine").kind == "api"  # one endpoint per kind


def test_the_analysis_memo_reports_a_hit_for_a_kept_result_not_for_a_first_run() -> None:
    told: list[str] = []
    memo = ThreadMemo(10, on_hit=lambda: told.append("analysis"))

    async def runs() -> list[int]:
        return [await memo.run(len, "abc") for _ in range(3)]

    assert asyncio.run(runs()) == [3, 3, 3]
    assert told == ["analysis", "analysis"]
