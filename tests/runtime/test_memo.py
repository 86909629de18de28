"""Sharing helpers: the size-bounded LRU, single-flight and the thread memo."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from external_query_service.runtime.memo import SingleFlight, SizedLRU, ThreadMemo


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
