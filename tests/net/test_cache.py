"""The response cache under the safe fetcher and trusted endpoints, over real loopback HTTP.

Time is an injected clock that tests move by hand: nothing here sleeps to let an entry age.
Every test runs on both entry stores: this process's memory and Redis (a key prefix of the
test's own, deleted afterwards).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from external_query_service.errors import BlockedDestination, UpstreamStatus
from external_query_service.net._cache import ResponseCache, cache_rules
from external_query_service.net._fetch import FetchedPage, HttpRuntime, SafeFetcher
from external_query_service.settings import CacheSettings, NetworkSettings
from external_query_service.storage._redis_cache import open_shared_cache
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.testing.server import RecordedRequest, json_reply
from tests.support.http_cache import START, Clock, network, page, url


class Fetching:
    """A fetcher over a cache on ``clock``; ``get`` fetches in a fresh event loop. Its
    entries live in Redis when ``redis`` (URL, key prefix) is set (the ``backend`` fixture)."""

    redis: tuple[str, str] | None = None

    def __init__(self, clock: Clock, net: NetworkSettings | None = None, **cache: Any) -> None:
        self.cache = self.make_cache(clock, **cache)
        self.fetcher = SafeFetcher(net or network(), cache=self.cache, clock=clock)

    @classmethod
    def make_cache(cls, clock: Clock, **cache: Any) -> ResponseCache:
        """A cache on ``clock`` in the test's backend."""
        if cls.redis is None:
            return ResponseCache(CacheSettings(**cache), clock=clock)
        url, prefix = cls.redis
        settings = CacheSettings(url=url, key_prefix=prefix, allow_unsigned=True, **cache)
        store = open_shared_cache(settings)
        assert store is not None
        made = ResponseCache(settings, clock=clock, shared=store.responses)
        assert made.shared
        return made

    def get(self, target: str) -> FetchedPage:
        async def go() -> FetchedPage:
            try:
                return await self.fetcher.fetch(target)
            finally:
                await self.fetcher.aclose()

        return asyncio.run(go())


@pytest.fixture(autouse=True, params=["memory", "redis"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Where ``Fetching`` keeps entries: memory, then Redis."""
    if request.param == "memory":
        yield "memory"
        return
    url: str = request.getfixturevalue("redis_url")
    prefix = f"eq-test-{uuid.uuid4().hex[:12]}:"
    monkeypatch.setattr(Fetching, "redis", (url, prefix))
    yield "redis"
    import redis

    client = redis.Redis.from_url(url)
    try:
        for key in client.scan_iter(match=prefix + "*", count=500):
            client.delete(key)
    finally:
        client.close()


def test_a_page_within_max_age_is_not_fetched_again_and_is_after_it(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/fresh", page("fresh", **{"Cache-Control": "max-age=60"}))
    clock = Clock()
    fetching = Fetching(clock)
    first = fetching.get(url(loopback, "/fresh"))
    clock.advance(59)
    again = fetching.get(url(loopback, "/fresh"))
    assert len(loopback.requests_to("/fresh")) == 1
    assert again.body == first.body
    assert again.raw_digest == first.raw_digest
    clock.advance(2)
    fetching.get(url(loopback, "/fresh"))
    assert len(loopback.requests_to("/fresh")) == 2


def test_a_kept_page_carries_the_time_of_its_real_fetch(loopback: LoopbackServer) -> None:
    loopback.route("/timed", page("timed", **{"Cache-Control": "max-age=600"}))
    clock = Clock()
    fetching = Fetching(clock)
    live = fetching.get(url(loopback, "/timed"))
    clock.advance(120)
    kept = fetching.get(url(loopback, "/timed"))
    assert live.fetched_at is None  # fetched just now: the caller's clock says when
    assert kept.fetched_at == START
    assert kept.raw_digest == live.raw_digest


def test_no_store_is_fetched_every_time_even_while_fetches_could_share(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/private", page("secret", **{"Cache-Control": "no-store"}))
    fetching = Fetching(Clock())
    for _ in range(3):
        fetching.get(url(loopback, "/private"))
    assert len(loopback.requests_to("/private")) == 3
    assert len(fetching.cache) == 0


def test_a_reply_that_says_nothing_is_kept_for_the_default_ttl(loopback: LoopbackServer) -> None:
    loopback.route("/plain", page("plain"))
    clock = Clock()
    fetching = Fetching(clock, default_ttl_s=30)
    fetching.get(url(loopback, "/plain"))
    clock.advance(29)
    fetching.get(url(loopback, "/plain"))
    assert len(loopback.requests_to("/plain")) == 1
    clock.advance(2)
    fetching.get(url(loopback, "/plain"))
    assert len(loopback.requests_to("/plain")) == 2


def test_a_zero_default_ttl_keeps_nothing_that_says_nothing(loopback: LoopbackServer) -> None:
    loopback.route("/plain", page("plain"))
    fetching = Fetching(Clock(), default_ttl_s=0)
    fetching.get(url(loopback, "/plain"))
    fetching.get(url(loopback, "/plain"))
    assert len(loopback.requests_to("/plain")) == 2


def test_s_maxage_wins_over_max_age_and_age_counts_against_both(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/shared", page("s", **{"Cache-Control": "max-age=5, s-maxage=100"}))
    loopback.route("/aged", page("a", **{"Cache-Control": "max-age=100", "Age": "90"}))
    clock = Clock()
    fetching = Fetching(clock)
    fetching.get(url(loopback, "/shared"))
    fetching.get(url(loopback, "/aged"))
    clock.advance(50)
    fetching.get(url(loopback, "/shared"))
    fetching.get(url(loopback, "/aged"))
    assert len(loopback.requests_to("/shared")) == 1  # 50 s < s-maxage 100
    assert len(loopback.requests_to("/aged")) == 2  # 90 s old on arrival + 50 s > 100


def test_expires_counts_from_the_date_header(loopback: LoopbackServer) -> None:
    headers = {"Date": "Mon, 30 Nov 2026 02:00:00 GMT", "Expires": "Mon, 30 Nov 2026 02:01:00 GMT"}
    loopback.route("/expires", page("e", **headers))
    clock = Clock()
    fetching = Fetching(clock)
    fetching.get(url(loopback, "/expires"))
    clock.advance(59)
    fetching.get(url(loopback, "/expires"))
    assert len(loopback.requests_to("/expires")) == 1
    clock.advance(2)
    fetching.get(url(loopback, "/expires"))
    assert len(loopback.requests_to("/expires")) == 2


def test_a_stale_page_with_an_etag_is_revalidated_and_a_304_reuses_the_body(
    loopback: LoopbackServer,
) -> None:
    def etagged(request: RecordedRequest) -> Reply:
        if request.headers.get("if-none-match") == '"v1"':
            return Reply(status=304, body=b"", content_type=None, headers={"ETag": '"v1"'})
        return page("version one", **{"ETag": '"v1"', "Cache-Control": "max-age=10"})

    loopback.route("/etag", etagged)
    clock = Clock()
    fetching = Fetching(clock)
    first = fetching.get(url(loopback, "/etag"))
    clock.advance(11)
    again = fetching.get(url(loopback, "/etag"))
    requests = loopback.requests_to("/etag")
    assert [r.headers.get("if-none-match") for r in requests] == [None, '"v1"']
    assert again.body == first.body
    assert again.raw_digest == first.raw_digest
    assert fetching.cache.revalidations == 1
    # The 304 carried no new freshness: the entry is fresh again for the old max-age.
    clock.advance(5)
    fetching.get(url(loopback, "/etag"))
    assert len(loopback.requests_to("/etag")) == 2


def test_no_cache_with_last_modified_is_revalidated_before_every_use(
    loopback: LoopbackServer,
) -> None:
    stamp = "Sun, 29 Nov 2026 10:00:00 GMT"

    def dated(request: RecordedRequest) -> Reply:
        if request.headers.get("if-modified-since") == stamp:
            return Reply(status=304, body=b"", content_type=None)
        return page("dated", **{"Last-Modified": stamp, "Cache-Control": "no-cache"})

    loopback.route("/dated", dated)
    fetching = Fetching(Clock())
    bodies = {fetching.get(url(loopback, "/dated")).body for _ in range(3)}
    requests = loopback.requests_to("/dated")
    assert len(requests) == 3
    assert [r.headers.get("if-modified-since") for r in requests] == [None, stamp, stamp]
    assert len(bodies) == 1


def test_a_changed_page_replaces_the_kept_one(loopback: LoopbackServer) -> None:
    versions = iter(["old", "new"])

    def changing(request: RecordedRequest) -> Reply:
        return page(
            next(versions), **{"ETag": f'"{len(loopback.requests)}"', "Cache-Control": "max-age=0"}
        )

    loopback.route("/changing", changing)
    fetching = Fetching(Clock())
    first = fetching.get(url(loopback, "/changing"))
    second = fetching.get(url(loopback, "/changing"))
    assert b"old" in first.body
    assert b"new" in second.body


def test_a_kept_page_is_refused_once_the_resolver_points_its_host_elsewhere(
    loopback: LoopbackServer,
) -> None:
    answers = iter([["127.0.0.1"], ["10.20.30.40"]])

    async def resolver(_host: str, _port: int) -> list[str]:
        return next(answers)

    loopback.route("/moved", page("moved", **{"Cache-Control": "max-age=600"}))
    net = network(resolve={})
    cache = Fetching.make_cache(Clock())
    fetcher = SafeFetcher(net, resolver=resolver, cache=cache, clock=Clock())
    target = url(loopback, "/moved", host="moving.test")

    async def go() -> None:
        try:
            await fetcher.fetch(target)
            with pytest.raises(BlockedDestination) as refused:
                await fetcher.fetch(target)
            assert refused.value.url == target
        finally:
            await fetcher.aclose()

    asyncio.run(go())
    assert len(loopback.requests_to("/moved")) == 1
    assert len(cache) == 1  # kept, and still not served


def test_a_shared_cache_never_serves_a_page_the_second_runtime_policy_refuses(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/shared-cache", page("kept", **{"Cache-Control": "max-age=600"}))
    clock = Clock()
    cache = Fetching.make_cache(clock)
    open_runtime = HttpRuntime(network(), cache=cache, clock=clock)
    # site-a.test still resolves to 127.0.0.1, which this policy does not admit.
    closed = network(allowed_networks=["10.0.0.0/8"])
    closed_runtime = HttpRuntime(closed, cache=cache, clock=clock)

    async def go() -> None:
        try:
            await open_runtime.fetcher.fetch(url(loopback, "/shared-cache"))
            with pytest.raises(BlockedDestination):
                await closed_runtime.fetcher.fetch(url(loopback, "/shared-cache"))
        finally:
            await open_runtime.aclose()
            await closed_runtime.aclose()

    asyncio.run(go())
    assert len(loopback.requests_to("/shared-cache")) == 1


def test_a_kept_redirect_is_replayed_hop_by_hop_through_the_callers_rule(
    loopback: LoopbackServer,
) -> None:
    target = url(loopback, "/landing")
    loopback.route("/moved-for-good", Reply(status=301, body=b"", headers={"Location": target}))
    loopback.route("/landing", page("landing", **{"Cache-Control": "max-age=600"}))
    clock = Clock()
    fetching = Fetching(clock)
    first = fetching.get(url(loopback, "/moved-for-good"))
    assert first.redirects == (target,)

    async def refused() -> None:
        try:
            await fetching.fetcher.fetch(
                url(loopback, "/moved-for-good"), allow_redirect=lambda _hop: False
            )
        finally:
            await fetching.fetcher.aclose()

    with pytest.raises(Exception, match="refused by the caller"):
        asyncio.run(refused())
    again = fetching.get(url(loopback, "/moved-for-good"))
    assert again.redirects == (target,)
    assert again.body == first.body
    assert len(loopback.requests_to("/moved-for-good")) == 1  # a 301 is kept
    assert len(loopback.requests_to("/landing")) == 1


def test_error_replies_are_not_kept(loopback: LoopbackServer) -> None:
    loopback.route(
        "/broken", Reply(status=503, body="down", headers={"Cache-Control": "max-age=600"})
    )
    fetching = Fetching(Clock())
    for _ in range(2):
        with pytest.raises(UpstreamStatus):
            fetching.get(url(loopback, "/broken"))
    assert len(loopback.requests_to("/broken")) == 2


def test_the_cache_stays_under_its_byte_bound_least_recently_used_out(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/big", Reply(body=b"x" * 10_000, content_type="text/plain"))
    fetching = Fetching(Clock(), max_bytes=35_000)
    for n in range(6):
        fetching.get(url(loopback, f"/big?n={n}"))
        assert fetching.cache.size <= 35_000
    assert len(fetching.cache) == 3
    fetching.get(url(loopback, "/big?n=5"))  # the newest is still kept
    fetching.get(url(loopback, "/big?n=0"))  # the oldest was evicted
    assert len(loopback.requests_to("/big")) == 7


@pytest.mark.usefixtures("https_worlds")
def test_api_replies_are_kept_and_their_fetched_at_replayed(loopback: LoopbackServer) -> None:
    loopback.route(
        "/api/latest", json_reply({"rate": "7.1"}, headers={"Cache-Control": "max-age=60"})
    )
    clock = Clock()
    runtime = HttpRuntime(network(), cache=Fetching.make_cache(clock), clock=clock)
    endpoint = runtime.endpoint(f"http://127.0.0.1:{loopback.port}/api")

    async def go() -> tuple[Any, Any]:
        try:
            live = await endpoint.get_json("latest")
            clock.advance(30)
            return live, await endpoint.get_json("latest")
        finally:
            await runtime.aclose()

    live, kept = asyncio.run(go())
    assert kept.data == live.data
    assert kept.raw_digest == live.raw_digest
    assert (live.fetched_at, kept.fetched_at) == (None, START)
    assert len(loopback.requests_to("/api/latest")) == 1


def test_identical_api_calls_in_flight_share_one_request_and_one_cancelled_caller_does_not_stop_it(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/api/slow", json_reply({"ok": True}, delay_s=0.3))
    runtime = HttpRuntime(network())  # no cache: only calls in flight at once are shared
    endpoint = runtime.endpoint(f"http://127.0.0.1:{loopback.port}/api")

    async def go() -> list[Any]:
        try:
            calls = [asyncio.ensure_future(endpoint.get_json("slow")) for _ in range(3)]
            await asyncio.sleep(0.05)
            calls[0].cancel()
            return await asyncio.gather(*calls[1:])
        finally:
            await runtime.aclose()

    replies = asyncio.run(go())
    assert [reply.data for reply in replies] == [{"ok": True}, {"ok": True}]
    assert len(loopback.requests_to("/api/slow")) == 1


@pytest.mark.parametrize(
    ("status", "headers", "storable", "lifetime"),
    [
        (200, {}, True, 300.0),
        (200, {"cache-control": "no-store"}, False, 300.0),
        (200, {"cache-control": "private, max-age=20"}, True, 20.0),
        (200, {"cache-control": "max-age=oops"}, False, 0.0),
        (200, {"cache-control": "max-age=20, max-age=90"}, True, 20.0),
        (200, {"vary": "*"}, False, 300.0),
        (200, {"expires": "0"}, False, 0.0),
        (302, {}, False, 0.0),
        (302, {"cache-control": "max-age=60"}, True, 60.0),
        (301, {}, True, 300.0),
        (206, {"cache-control": "max-age=60"}, False, 60.0),
        (200, {"cache-control": "no-cache"}, False, 300.0),
        (200, {"cache-control": "no-cache", "etag": '"a"'}, True, 300.0),
    ],
)
def test_cache_rules_follow_rfc_9111_for_our_subset(
    status: int, headers: dict[str, str], storable: bool, lifetime: float
) -> None:
    rules = cache_rules(status, headers, received=START.timestamp(), default_ttl=300.0)
    assert (rules.storable, rules.lifetime) == (storable, lifetime)
