"""The shared cache on a real Redis: shared across real processes, its byte bound, fetch
leases whose holder dies, a Redis that goes away mid-run, and ``serve --workers 2``.

Every test uses a key prefix of its own and deletes its keys afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from external_query_service import ExternalQueryService
from external_query_service.net._cache import ResponseCache
from external_query_service.net._fetch import SafeFetcher
from external_query_service.settings import CacheSettings, NetworkSettings, Settings
from external_query_service.storage._redis_cache import SharedCache, open_shared_cache
from external_query_service.testing import LoopbackServer, Reply, World, article, hit
from external_query_service.testing.world_files import dump_toml
from external_query_service.text._analyse import analyse_page, analysis_from_json, analysis_to_json
from tests.support.paths import REPO
from tests.support.services import service_missing
from tests.support.serving import CLI, served_workers

QUESTION = "What did the Zhanjiang port authority announce about the new berth?"


def shared(redis_url: str, prefix: str, **cache: Any) -> SharedCache:
    found = open_shared_cache(
        CacheSettings(url=redis_url, key_prefix=prefix, allow_unsigned=True, **cache)
    )
    assert found is not None
    return found


def port_world(world: World) -> str:
    url = world.page(
        "port-news.test",
        "/berth",
        article(
            "Zhanjiang port opens a new berth",
            [
                "The Zhanjiang port authority announced on 30 November 2026 that the new "
                "container berth opens to ships on 1 December 2026.",
                "The berth handles vessels of up to 200,000 tonnes.",
            ],
            published="2026-11-30",
        ),
    )
    world.results(QUESTION, [hit(url, "Port news", "New berth opens", "2026-11-30")])
    return url


def world_settings(world: World, **sections: Any) -> dict[str, Any]:
    settings = world.settings(world.searxng(), **sections)
    data: dict[str, Any] = settings.model_dump(mode="json", exclude_none=True)
    return data


# -- the analysis format ---------------------------------------------------------------------


def test_a_page_analysis_comes_back_from_json_exactly() -> None:
    body = article(
        "Berth",
        ["The new berth opens on 1 December 2026.", "Ships of 200,000 tonnes fit."],
        published="2026-11-30",
    ).encode()
    analysis = analyse_page(
        body,
        url="http://port-news.test/berth",
        declared_charset="utf-8",
        content_type="text/html",
        query="new berth opens",
        targets=("berth",),
        min_score=0,
    )
    assert analysis.snippets  # something to round-trip
    again = analysis_from_json(analysis_to_json(analysis))
    assert again == analysis
    assert [s.chunk.offset for s in again.snippets] == [s.chunk.offset for s in analysis.snippets]
    with pytest.raises(json.JSONDecodeError):
        analysis_from_json(b"not json")
    # The form of earlier versions (every chunk's terms, no counts) is refused, not misread:
    # the shared cache then drops the entry and the page is analysed again.
    earlier = json.loads(analysis_to_json(analysis))
    for key in ("chunks", "frequencies", "term_total"):
        del earlier[key]
    earlier["chunk_terms"] = [["berth"], ["opens"]]
    with pytest.raises(KeyError):
        analysis_from_json(json.dumps(earlier).encode())


def test_a_page_analysis_made_by_one_memo_is_reused_by_another_through_redis(
    redis_url: str, prefix: str
) -> None:
    from external_query_service._wiring import _shared_analyses, analysis_memo

    body = article("Berth", ["The new berth opens on 1 December 2026."]).encode()
    calls: list[str] = []

    def counted(data: bytes, *, query: str) -> Any:
        calls.append(query)
        return analyse_page(
            data,
            url="http://port-news.test/berth",
            declared_charset="utf-8",
            content_type="text/html",
            query=query,
        )

    settings = CacheSettings(url=redis_url, key_prefix=prefix, allow_unsigned=True)
    stores = [shared(redis_url, prefix), shared(redis_url, prefix)]
    memos = [analysis_memo(settings, _shared_analyses(store)) for store in stores]
    first = asyncio.run(memos[0].run(counted, body, query="berth"))
    second = asyncio.run(memos[1].run(counted, body, query="berth"))  # another "process"
    assert calls == ["berth"]
    assert second == first
    asyncio.run(memos[1].run(counted, body, query="ships"))  # another query: its own work
    assert calls == ["berth", "ships"]
    for store in stores:
        store.close()


# -- the store -------------------------------------------------------------------------------


def test_the_byte_bound_evicts_the_least_recently_used(redis_url: str, prefix: str) -> None:
    cache = shared(redis_url, prefix, max_bytes=2500)
    entries = cache.responses
    assert entries.put("a", b"{}", b"x" * 1000, ttl_s=60)
    assert entries.put("b", b"{}", b"x" * 1000, ttl_s=60)
    assert entries.get("a") is not None  # "a" is now the most recently used
    assert entries.put("c", b"{}", b"x" * 1000, ttl_s=60)
    assert entries.get("b") is None
    assert entries.get("a") is not None
    assert entries.get("c") is not None
    assert entries.total() <= 2500
    assert entries.count() == 2
    assert not entries.put("huge", b"{}", b"x" * 3000, ttl_s=60)  # alone over the bound
    cache.close()


def test_a_lease_is_exclusive_until_released(redis_url: str, prefix: str) -> None:
    cache = shared(redis_url, prefix)
    token = cache.responses.claim("job", 30)
    assert token
    assert cache.responses.claim("job", 30) is None
    cache.responses.release("job", "someone else")
    assert cache.responses.claimed("job")
    cache.responses.release("job", token)
    assert not cache.responses.claimed("job")
    cache.close()


def test_a_cache_url_is_checked() -> None:
    for bad in ("http://127.0.0.1:6379", "redis://", "redis://h/zero", "unix://"):
        with pytest.raises(ValidationError, match="url"):
            CacheSettings(url=bad)
    assert CacheSettings(url="rediss://cache.example:6380/2").url is not None


# -- leases between processes -------------------------------------------------------------------

_HOLDER = """
import asyncio, json, sys
from external_query_service.net._cache import ResponseCache
from external_query_service.net._fetch import SafeFetcher
from external_query_service.settings import CacheSettings, NetworkSettings
from external_query_service.storage._redis_cache import open_shared_cache
args = json.loads(sys.argv[1])
settings = CacheSettings(**args["cache"])
cache = ResponseCache(settings, shared=open_shared_cache(settings).responses)
fetcher = SafeFetcher(NetworkSettings(**args["network"]), cache=cache)
asyncio.run(fetcher.fetch(args["url"]))
"""


def test_a_lease_whose_holder_dies_mid_flight_lets_a_waiter_fetch(
    loopback: LoopbackServer, redis_url: str, prefix: str
) -> None:
    arrived = threading.Event()
    calls: list[int] = []

    def slow_then_fast(_request: Any) -> Reply:
        calls.append(1)
        if len(calls) == 1:
            arrived.set()
            return Reply(body="<p>late</p>", delay_s=30)  # the holder never sees it
        return Reply(body="<p>on time</p>")

    loopback.route("/slow", slow_then_fast)
    url = f"http://site-a.test:{loopback.port}/slow"
    network = {"allowed_networks": ["127.0.0.1/32"], "resolve": {"site-a.test": "127.0.0.1"}}
    cache_settings = {
        "url": redis_url,
        "key_prefix": prefix,
        "lease_s": 1.0,
        "allow_unsigned": True,
    }
    args = json.dumps(
        {"url": url, "network": {**network, "timeout_s": 60}, "cache": cache_settings}
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, args], env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    try:
        assert arrived.wait(60)  # the holder has the lease and its request is out
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        settings = CacheSettings(**cache_settings)
        store = shared(redis_url, prefix, lease_s=1.0)
        cache = ResponseCache(settings, shared=store.responses)
        fetcher = SafeFetcher(NetworkSettings(**network, timeout_s=20), cache=cache)

        async def go() -> bytes:
            try:
                return (await fetcher.fetch(url)).body
            finally:
                await fetcher.aclose()

        assert b"on time" in asyncio.run(go())
        assert len(calls) == 2  # the dead holder's request, then the waiter's own
        store.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)


# -- two processes share what they fetched ------------------------------------------------------

_ASK = """
import json, sys
from external_query_service import ExternalQueryService
from external_query_service.settings import Settings
service = ExternalQueryService(Settings.from_mapping(json.loads(sys.argv[1])))
answer = service.answer(sys.argv[2])
print(json.dumps({"status": answer.status}))
service.close()
"""


def ask_in_a_process(settings: dict[str, Any]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _ASK, json.dumps(settings), QUESTION],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    status: str = json.loads(done.stdout.strip().splitlines()[-1])["status"]
    return status


def test_a_second_process_fetches_nothing_the_first_already_fetched(
    loopback: LoopbackServer, redis_url: str, prefix: str
) -> None:
    world = World(loopback)
    page = port_world(world)
    settings = world_settings(
        world, cache={"url": redis_url, "key_prefix": prefix, "allow_unsigned": True}
    )
    first = ask_in_a_process(settings)
    fetched = len(world.requests)
    assert fetched >= 2  # the search and the page
    assert world.requests_to("/berth")
    second = ask_in_a_process(settings)
    assert second == first
    assert len(world.requests) == fetched  # nothing went out again
    assert page


# -- a Redis that goes away -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A Redis server of this test's own on a free port (killed by the test or afterwards)."""
    pytest.importorskip("redis")  # the cache talks to it through the redis extra
    binary = shutil.which("redis-server")
    if binary is None:
        service_missing("Redis", "redis-server is not installed")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                threading.Event().wait(0.05)
        yield process, f"redis://127.0.0.1:{port}/0"
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def test_answers_go_on_when_redis_dies_mid_run_and_the_errors_are_counted(
    loopback: LoopbackServer, own_redis: tuple[subprocess.Popen[bytes], str]
) -> None:
    process, url = own_redis
    world = World(loopback)
    port_world(world)
    settings = Settings.from_mapping(
        world_settings(
            world,
            cache={"url": url, "key_prefix": "eq:", "redis_retry_s": 0, "allow_unsigned": True},
        )
    )
    service = ExternalQueryService(settings)
    try:
        from external_query_service.server._metrics import ServerMetrics

        metrics = ServerMetrics(service)
        first = service.answer(QUESTION)
        assert service.shared_cache is not None
        assert service.shared_cache.errors == 0
        before = len(world.requests)
        process.kill()
        process.wait(30)
        second = service.answer(QUESTION)
        assert second.status == first.status
        assert len(world.requests) > before  # fetched directly, without the cache
        assert service.shared_cache.errors > 0
        counted = re.search(rb"^external_query_cache_errors_total (\S+)$", metrics.render(), re.M)
        assert counted is not None
        assert float(counted.group(1)) == service.shared_cache.errors
    finally:
        service.close()


# -- serve --workers 2 ------------------------------------------------------------------------


def test_workers_above_one_without_a_cache_url_are_refused_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    done = subprocess.run(
        [*CLI, "serve", "--docs", str(docs), "--port", "0", "--workers", "2"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "needs [cache] url" in done.stderr
    assert done.stderr.count("\n") == 1


def test_two_workers_both_answer_share_sessions_and_add_up_their_metrics(
    loopback: LoopbackServer, redis_url: str, prefix: str, tmp_path: Path
) -> None:
    pytest.importorskip("uvicorn")
    world = World(loopback)
    port_world(world)
    # Signed: sessions and entries each worker wrote verify in the other. Generous Redis
    # timings: this test is about sharing, and on a busy host two workers answering twelve
    # questions at once can hold a Redis reply past the defaults, whose circuit would then
    # skip the session writes for a while (the slow-Redis tests cover that rule).
    signed = {
        "url": redis_url,
        "key_prefix": prefix,
        "signing_key_env": "EQ_TEST_SERVE_KEY",
        "redis_timeout_s": 5.0,
        "redis_slow_s": 5.0,
    }
    settings = world_settings(
        world, cache=signed, ledger={"path": str(tmp_path / "ledger.sqlite3")}
    )
    config = tmp_path / "serve.toml"
    config.write_text(dump_toml(settings), encoding="utf-8")
    scratch = tmp_path / "tmp"  # where serve makes its metrics folder
    scratch.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TMPDIR": str(scratch),
        "EQ_TEST_SERVE_KEY": "a secret both workers share",
    }
    command = [*CLI, "serve", "--config", str(config), "--port", "0", "--workers", "2"]
    with served_workers(command, env) as (process, url):
        asked = 12

        async def ask_all() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                return await asyncio.gather(
                    *(client.post("/v1/answer", json={"question": QUESTION}) for _ in range(asked))
                )

        replies = asyncio.run(ask_all())
        assert all(reply.status_code == 200 for reply in replies)
        pids: set[int] = set()
        for _ in range(400):
            if len(pids) == 2:
                break
            with httpx.Client(base_url=url, timeout=10) as client:  # a new connection each
                pids.add(client.get("/healthz").json()["pid"])
        assert len(pids) == 2
        session = replies[0].json()["session_id"]
        follow_ups = 0
        for _ in range(6):  # new connections: some reach the other worker
            with httpx.Client(base_url=url, timeout=60) as client:
                reply = client.post(
                    f"/v1/sessions/{session}/follow-up", json={"question": QUESTION}
                )
            assert reply.status_code == 200
            follow_ups += 1
        with httpx.Client(base_url=url, timeout=30) as client:
            text = client.get("/metrics").text
            ready = client.get("/readyz").json()
        counted = sum(
            float(value)
            for value in re.findall(r"^external_query_questions_total\{[^}]*\} (\S+)$", text, re.M)
        )
        assert counted == asked + follow_ups
        assert ready["ledger"] == {"ready": True, "reason": None}
        assert ready["cache"] == {"ready": True, "reason": None}
        assert re.search(r"^external_query_cache_rejected_total 0\.0$", text, re.M)
        assert [path.name[:23] for path in scratch.iterdir()] == ["external-query-metrics-"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        assert list(scratch.iterdir()) == []  # the metrics folder is gone
