"""Sharing helpers: the size-bounded LRU, single-flight and the thread memo."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

import pytest

from external_query_service._digests import sha256_digest
from external_query_service._memo import (
    Digested,
    SingleFlight,
    SizedLRU,
    ThreadMemo,
    held_bytes,
)
from external_query_service._wiring import analysis_memo
from external_query_service.net._cache import CachedResponse, HttpExchange
from external_query_service.settings import CacheSettings
from external_query_service.text._analyse import analyse_page
from tests.support.held_memory import allocated_by, page_html_bytes, port_analysis
from tests.support.paths import REPO


def test_the_lru_evicts_least_recently_used_first_and_skips_kept_keys() -> None:
    kept = {"a"}
    lru: SizedLRU[str, bytes] = SizedLRU(10, len, keep=kept.__contains__)
    lru.put("a", b"aaaa")
    lru.put("b", b"bbbb")
    lru.get("b")
    lru.put("c", b"cccc")  # over the bound: "a" is kept, so "b" goes
    assert sorted(lru.keys()) == ["a", "c"]
    assert lru.total == 8
    assert lru.put("huge", b"x" * 11) is False
    assert "huge" not in lru


def test_a_put_left_untrimmed_waits_for_the_callers_trim_which_frees_just_enough() -> None:
    evicted: list[str] = []
    lru: SizedLRU[str, bytes] = SizedLRU(10, len, on_evict=lambda key, _v: evicted.append(key))
    for key in "abcd":
        assert lru.put(key, b"xx", trim=False)
    assert lru.put("e", b"xxxx", trim=False)
    assert lru.total == 12  # past the bound until the caller trims
    lru.trim(keep={"a"}.__contains__)
    assert evicted == ["b"]  # the least recently used that may go, and no more than needed
    assert sorted(lru.keys()) == ["a", "c", "d", "e"]
    assert lru.total == 10


def test_single_flight_shares_one_run_and_survives_one_cancelled_waiter() -> None:
    runs = []

    async def slow() -> str:
        runs.append(1)
        await asyncio.sleep(0.1)
        return "done"

    async def go() -> list[str]:
        flights = SingleFlight()
        calls = [asyncio.ensure_future(flights.run("k", slow)) for _ in range(4)]
        await asyncio.sleep(0.01)
        calls[0].cancel()
        results = await asyncio.gather(*calls[1:])
        assert flights.in_flight() == 0
        return results

    assert asyncio.run(go()) == ["done"] * 3
    assert runs == [1]


def test_single_flight_cancels_the_run_when_every_waiter_is_gone() -> None:
    finished = []

    async def slow() -> None:
        await asyncio.sleep(5)
        finished.append(1)

    async def go() -> None:
        flights = SingleFlight()
        call = asyncio.ensure_future(flights.run("k", slow))
        await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(0.01)
        assert flights.in_flight() == 0

    asyncio.run(go())
    assert finished == []


def test_the_thread_memo_runs_identical_work_once_and_keeps_it_while_it_fits() -> None:
    calls: list[bytes] = []
    lock = threading.Lock()

    def analyse(body: bytes, *, query: str) -> str:
        with lock:
            calls.append(body)
        time.sleep(0.05)
        return f"{len(body)}:{query}"

    memo = ThreadMemo(max_size=2)

    async def go() -> list[str]:
        same = [memo.run(analyse, b"page", query="q") for _ in range(10)]
        first = await asyncio.gather(*same)
        again = await memo.run(analyse, b"page", query="q")
        other = await memo.run(analyse, b"page", query="another")
        return [*first, again, other]

    results = asyncio.run(go())
    assert results == ["4:q"] * 11 + ["4:another"]
    assert calls == [b"page", b"page"]


def test_a_memo_of_size_zero_keeps_nothing() -> None:
    calls = []

    def work(value: int) -> int:
        calls.append(value)
        return value * 2

    memo = ThreadMemo()

    async def go() -> None:
        assert await memo.run(work, 2) == 4
        assert await memo.run(work, 2) == 4

    asyncio.run(go())
    assert calls == [2, 2]
    assert len(memo) == 0


def test_a_memo_computes_through_its_runner_and_still_keeps_and_shares() -> None:
    calls: list[tuple[object, ...]] = []

    async def runner(fn: object, *args: object, **kwargs: object) -> str:
        calls.append((fn, args, tuple(sorted(kwargs.items()))))
        await asyncio.sleep(0.05)  # long enough for the second caller to join in flight
        return f"ran {args[0]!r} elsewhere"

    memo = ThreadMemo(max_size=10, runner=runner)

    async def scenario() -> list[str]:
        first = await asyncio.gather(memo.run(len, b"abc"), memo.run(len, b"abc"))
        again = await memo.run(len, b"abc")
        return [*first, again]

    assert asyncio.run(scenario()) == ["ran b'abc' elsewhere"] * 3
    assert calls == [(len, (b"abc",), ())]


class _DictMemo:
    """A shared memo in a dict, recording the keys asked for."""

    def __init__(self) -> None:
        self.kept: dict[str, object] = {}
        self.asked: list[str] = []

    def get(self, key: str) -> object | None:
        self.asked.append(key)
        return self.kept.get(key)

    def put(self, key: str, value: object) -> None:
        self.kept[key] = value


def test_bytes_given_with_their_digest_are_keyed_as_the_memo_keys_bytes_itself() -> None:
    calls: list[object] = []

    def work(body: bytes, *, query: str) -> str:
        calls.append(body)
        return f"{type(body).__name__} {len(body)} {query}"

    body = b"<p>page</p>"
    shared = _DictMemo()
    digested, plain = ThreadMemo(10, shared=shared), ThreadMemo(10, shared=shared)

    async def go() -> list[str]:
        first = await digested.run(work, Digested(body, sha256_digest(body)), query="q")
        again = await digested.run(work, body, query="q")  # the same key here: a hit
        elsewhere = await plain.run(work, body, query="q")  # and in the shared store
        other = await digested.run(work, Digested(b"other", sha256_digest(b"other")), query="q")
        return [first, again, elsewhere, other]

    assert asyncio.run(go()) == ["bytes 11 q"] * 3 + ["bytes 5 q"]
    assert calls == [body, b"other"]  # the function is given the bytes themselves
    assert len(shared.kept) == 2
    assert shared.asked[0] == shared.asked[1]  # one key, whichever way the bytes came


# --- byte accounting by what entries really hold ---------------------------------------------


def test_held_bytes_of_a_page_analysis_agree_with_tracemalloc() -> None:
    script = (
        "import json\n"
        "from tests.support.held_memory import page_analysis_measured\n"
        "print(json.dumps(page_analysis_measured()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["cuts"]
    assert abs(found["with_cuts"] - found["allocated"]) <= 0.05 * found["allocated"]
    counted = found["walked"]
    # The analysis's own count (no object walk) is the walk's but for objects every instance
    # shares (attribute names, small ints), which the walk counts once; its term counts hold
    # more than its text does.
    assert 0 <= counted - found["own"] <= 0.03 * counted
    assert counted > 2 * found["text"]


def test_held_bytes_of_a_cached_response_agree_with_tracemalloc() -> None:
    def build() -> CachedResponse:
        exchange = HttpExchange(
            url="http://port-1.example/news",
            status=200,
            content_type="text/html",
            charset="utf-8",
            body=page_html_bytes(1),
            fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        )
        headers = tuple((f"x-header-{n}", f"value {n}") for n in range(20))
        return CachedResponse(exchange, headers, 1.0, 0.0, 60.0, False, '"tag-1"', None)

    entry, allocated = allocated_by(build)
    assert abs(held_bytes(entry) - allocated) <= 0.05 * allocated


def test_the_analysis_memo_keeps_no_more_than_its_bound_by_held_bytes() -> None:
    one = port_analysis(0).held_bytes()
    bound = int(2.8 * one)
    memo = analysis_memo(CacheSettings(analysis_max_bytes=bound))

    async def analyse_all() -> None:
        for n in range(6):
            await memo.run(
                analyse_page,
                page_html_bytes(n),
                url=f"http://port-{n}.example/news",
                declared_charset="utf-8",
                content_type="text/html",
                query="港口集装箱吞吐量增长多少",
            )

    asyncio.run(analyse_all())
    # Counted by their text alone, all six would fit; by what they hold, two do.
    assert 6 * (sys.getsizeof(port_analysis(0).text) + 1024) < bound
    assert len(memo) == 2
