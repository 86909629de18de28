"""The one cached exchange path (net/_exchange.py), on its own: what it sends, when it
replays, how a 304 confirms a kept body, and what it shares. The wire step is a scripted
``Send`` (the fetcher's and endpoints' real ones are exercised against loopback servers in
net/test_fetch.py and net/test_cache.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx

from external_query_service.net._cache import CacheKey, HttpExchange, ResponseCache
from external_query_service.net._exchange import CachedExchange, Received

START = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
KEY: CacheKey = ("api", "GET", "http://api.test/v1/rates")


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


class Origin:
    """A scripted wire step: answers in order, noting the validators each request carried."""

    def __init__(self, clock: Clock, *answers: tuple[int, dict[str, str], bytes]) -> None:
        self._clock = clock
        self._answers = list(answers)
        self.sent: list[dict[str, str]] = []

    async def send(self, validators: dict[str, str]) -> Received:
        self.sent.append(dict(validators))
        status, headers, body = self._answers.pop(0)
        if status == 304:
            return Received(httpx.Headers(headers), None)
        reply = HttpExchange(
            url=KEY[2],
            status=status,
            content_type="application/json",
            charset=None,
            body=body,
            fetched_at=self._clock(),
        )
        return Received(httpx.Headers(headers), reply)


def test_a_fresh_kept_reply_is_replayed_without_a_request() -> None:
    clock = Clock()
    cache = ResponseCache(clock=clock)
    exchange = CachedExchange(cache, clock)
    origin = Origin(clock, (200, {"cache-control": "max-age=60"}, b'{"usd": 7.1}'))

    first = asyncio.run(exchange.request(KEY, origin.send))
    clock.now += timedelta(seconds=30)
    again = asyncio.run(exchange.request(KEY, origin.send))

    assert origin.sent == [{}]  # one request, without validators
    assert (first.kept, again.kept) == (False, True)
    assert again.body == b'{"usd": 7.1}'
    assert again.fetched_at == START  # when it really came from the origin
    assert cache.hits == 1


def test_a_stale_reply_is_asked_for_with_its_validators_and_a_304_confirms_it() -> None:
    clock = Clock()
    cache = ResponseCache(clock=clock)
    exchange = CachedExchange(cache, clock)
    origin = Origin(
        clock,
        (200, {"cache-control": "max-age=10", "etag": '"v1"'}, b'{"usd": 7.1}'),
        (304, {"cache-control": "max-age=10", "etag": '"v1"'}, b""),
    )

    asyncio.run(exchange.request(KEY, origin.send))
    clock.now += timedelta(seconds=11)
    confirmed = asyncio.run(exchange.request(KEY, origin.send))

    assert origin.sent == [{}, {"If-None-Match": '"v1"'}]
    assert confirmed.body == b'{"usd": 7.1}'
    assert confirmed.fetched_at == clock.now  # confirmed now: as fresh as a new reply
    assert (cache.revalidations, cache.hits) == (1, 0)
    assert asyncio.run(exchange.fresh(KEY)) is not None  # fresh again after the 304


def test_without_a_key_nothing_is_looked_up_or_kept() -> None:
    clock = Clock()
    cache = ResponseCache(clock=clock)
    exchange = CachedExchange(cache, clock)
    origin = Origin(
        clock,
        (200, {"cache-control": "max-age=60", "etag": '"v1"'}, b"{}"),
        (200, {"cache-control": "max-age=60", "etag": '"v1"'}, b"{}"),
    )

    asyncio.run(exchange.request(None, origin.send))
    asyncio.run(exchange.request(None, origin.send))

    assert origin.sent == [{}, {}]
    assert len(cache) == 0


def test_identical_requests_at_once_go_out_once() -> None:
    clock = Clock()
    exchange = CachedExchange(None, clock)
    calls = 0
    release = asyncio.Event()

    async def fetch() -> str:
        nonlocal calls
        calls += 1
        await release.wait()
        return "page"

    async def kept() -> str | None:
        return None

    async def both() -> list[str]:
        waiting = [asyncio.ensure_future(exchange.once("u", fetch, key=KEY, kept=kept))]
        waiting.append(asyncio.ensure_future(exchange.once("u", fetch, key=KEY, kept=kept)))
        await asyncio.sleep(0)
        release.set()
        return list(await asyncio.gather(*waiting))

    assert asyncio.run(both()) == ["page", "page"]
    assert calls == 1
