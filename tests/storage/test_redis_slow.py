"""A slow Redis never stalls the worker: behind a loopback proxy that holds every reply
0.2 s (under the 0.25 s timeout), a streak of slow replies counts toward the same circuit
errors do, and while the circuit rests no answer sends Redis anything (so none waits on it);
``/healthz`` answers in under 50 ms while a question waits on Redis (no Redis call runs on the
event loop)."""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from external_query_service import ExternalQueryService
from external_query_service.testing import LoopbackServer, World, article, hit
from tests.support.world import make_service

DELAY_S = 0.2
PARAGRAPH = "湛江港今年货物吞吐量预计突破3亿吨，同比增长约百分之八，集装箱航线持续加密。"


class DelayingProxy:
    """A TCP proxy on 127.0.0.1 to ``target`` that holds every chunk of every reply
    ``delay_s`` before passing it on (requests go through at once, counted in ``requests``).
    Daemon threads; every socket is closed by ``close()``."""

    def __init__(self, target: tuple[str, int], delay_s: float) -> None:
        self._target = target
        self._delay_s = delay_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = [self._listener]
        self._closed = threading.Event()
        #: Chunks relayed towards Redis: each command a client sends is at least one.
        self.requests = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target, timeout=5)
            self._sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, 0.0), daemon=True).start()
            threading.Thread(
                target=self._pipe, args=(upstream, client, self._delay_s), daemon=True
            ).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, delay_s: float) -> None:
        try:
            while chunk := source.recv(65536):
                if delay_s:
                    time.sleep(delay_s)
                else:
                    self.requests += 1
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()

    def close(self) -> None:
        self._closed.set()
        for sock in self._sockets:
            sock.close()


@pytest.fixture
def slow_proxy(redis_url: str) -> Iterator[DelayingProxy]:
    """A proxy to the test Redis that delays every reply by ``DELAY_S``."""
    parts = urlsplit(redis_url)
    proxy = DelayingProxy((parts.hostname or "127.0.0.1", parts.port or 6379), DELAY_S)
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture
def slow_redis(redis_url: str, slow_proxy: DelayingProxy) -> str:
    """The URL of the test Redis behind ``slow_proxy``."""
    return f"redis://127.0.0.1:{slow_proxy.port}{urlsplit(redis_url).path or '/0'}"


def pages(world: World, tag: str, count: int) -> list[dict[str, Any]]:
    """``count`` questions' semantics, each with a page of its own (nothing cached)."""
    asked = []
    for n in range(count):
        query = f"湛江港 吞吐量 {tag}{n}"
        url = world.page(
            "port-news.test",
            f"/{tag}/{n}",
            article("湛江港吞吐量", [PARAGRAPH], published="2026-11-20"),
        )
        world.results(query, [hit(url, "湛江港吞吐量", "湛江港货物吞吐量")])
        asked.append({"entities": ["湛江港"], "search_queries": [query]})
    return asked


def answer(service: ExternalQueryService, semantics: dict[str, Any]) -> None:
    assert service.answer("湛江港今年货物吞吐量是多少？", semantics).status == "answered"


def service(world: World, **cache: Any) -> ExternalQueryService:
    # Pages analysed in a thread: no worker processes to start, so the first question of a
    # service costs what the others do and only Redis tells the two services apart.
    return make_service(
        world,
        world.searxng(),
        cache={"allow_unsigned": True, **cache},
        analysis={"processes": 0},
    )


def test_once_slow_replies_open_the_circuit_no_answer_sends_redis_anything(
    loopback: LoopbackServer, slow_redis: str, slow_proxy: DelayingProxy, prefix: str
) -> None:
    # What makes a slow Redis harmless is that, after a streak of slow replies, the answers
    # stop asking it: counted at the proxy, not timed, so a busy host cannot fail the test.
    world = World(loopback)
    asked = pages(world, "slow", 7)
    # A pause longer than the test: the circuit, once open, stays open to the end.
    with service(world, url=slow_redis, key_prefix=prefix, redis_retry_s=600) as shared:
        assert shared.shared_cache is not None
        sent, errors = [], []
        for semantics in asked:
            answer(shared, semantics)
            sent.append(slow_proxy.requests)
            errors.append(shared.shared_cache.errors)

    assert errors[-1] == 1  # the slow replies were counted toward the circuit, once
    opened = errors.index(1)
    assert opened < len(asked) - 2, errors  # early enough to leave answers after it
    assert sent[0] > 0  # Redis was asked before the circuit opened
    # Every answer after the one that opened the circuit (and the one after it, which a
    # command sent just before the pause may still reach) sent Redis nothing.
    settled = sent[opened + 1 :]
    assert settled == [settled[0]] * len(settled), sent


def test_healthz_never_waits_on_redis_while_questions_do(
    loopback: LoopbackServer, slow_redis: str, prefix: str
) -> None:
    pytest.importorskip("uvicorn")
    from external_query_service.server import ServerThread

    world = World(loopback)
    [semantics] = pages(world, "health", 1)
    question = {"question": "湛江港今年货物吞吐量是多少？", "semantics": semantics}
    # Never paused: every Redis call (the page cache's, the session's) takes the delay.
    slow = {
        "url": slow_redis,
        "key_prefix": prefix,
        "redis_slow_s": 30,
        "redis_timeout_s": 5,
        "allow_unsigned": True,
    }
    with ServerThread(service(world, **slow)) as server:
        first = httpx.post(server.url + "/v1/answer", json=question, timeout=60)
        session = first.json()["session_id"]
        follow_up = f"{server.url}/v1/sessions/{session}/follow-up"

        def ask_again() -> None:  # each follow-up reads and writes its session in Redis
            for _ in range(3):
                assert httpx.post(follow_up, json=question, timeout=60).status_code == 200

        askers = [threading.Thread(target=ask_again) for _ in range(3)]
        for asker in askers:
            asker.start()
        took = []
        with httpx.Client(base_url=server.url, timeout=10) as client:
            while any(asker.is_alive() for asker in askers) and len(took) < 30:
                began = time.perf_counter()
                assert client.get("/healthz").status_code == 200
                took.append(time.perf_counter() - began)
                time.sleep(0.02)
        for asker in askers:
            asker.join(60)

    assert len(took) >= 5  # the follow-ups were waiting on Redis all along
    # Each Redis reply takes DELAY_S: a health check that waited on even one would take that
    # long; one that never does answers in milliseconds, even on a busy host.
    assert statistics.median(took) < DELAY_S / 2, took
