"""Figures behind the HTTP service's hand-written parts, beside the library each could be.

For each: the token bucket (``server/_access.py``) against ``limits``' strategies, the SSE
framing (``server/_streaming.py``) against ``sse-starlette``'s ``EventSourceResponse``, the
request ids (``server/_correlation.py``) against ``asgi-correlation-id``, the Host
allow-list (``server/_hosts.py``) against Starlette's ``TrustedHostMiddleware``, and the
model client (``llm/_client.py``) against the ``openai`` package's import cost. Behaviour is
printed as observed; times are min/median/max of interleaved runs, with the load average.

    pip install limits asgi-correlation-id sse-starlette openai   # measured, not depended on
    python bench/library_choices.py [--runs 9]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from external_query_service.server._access import TokenBuckets


def _figures(samples: list[float]) -> str:
    ms = [value * 1000 for value in samples]
    return f"min {min(ms):.1f} / median {statistics.median(ms):.1f} / max {max(ms):.1f} ms"


def rate_limits() -> None:
    """After a burst of ``rate`` requests, when may the next one go?"""
    from limits import RateLimitItemPerMinute, storage, strategies

    rate = 60
    now = [0.0]
    bucket = TokenBuckets(rate, clock=lambda: now[0])
    for _ in range(rate):
        bucket.take("k")
    print(
        f"token bucket, {rate}/min after a burst of {rate}: next in {bucket.take('k').wait_s:.1f} s"
    )
    item = RateLimitItemPerMinute(rate)
    for name in ("MovingWindowRateLimiter", "SlidingWindowCounterRateLimiter"):
        limiter = getattr(strategies, name)(storage.MemoryStorage())
        for _ in range(rate):
            limiter.hit(item, "k")
        reset, remaining = limiter.get_window_stats(item, "k")
        print(f"limits {name}: {remaining} left, next in {reset - time.time():.1f} s")


async def _drive(app: Callable[..., Awaitable[None]]) -> int:
    """One GET through ``app`` in process; the bytes of body it sent."""
    sent = 0
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if not done.is_set():
            done.set()
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # no disconnect: the stream ends on its own
        return {}

    async def send(message: dict[str, Any]) -> None:
        nonlocal sent
        sent += len(message.get("body", b""))

    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}
    await app(scope, receive, send)
    return sent


def sse(runs: int, events: int = 2000) -> None:
    """Streaming ``events`` small events through each framing, in process."""
    from fastapi.responses import StreamingResponse
    from sse_starlette import EventSourceResponse, ServerSentEvent

    from external_query_service.server._streaming import sse as frame

    async def ours() -> Any:
        async def body() -> Any:
            for n in range(events):
                yield frame("attempt", {"n": n})

        return StreamingResponse(body(), media_type="text/event-stream")

    async def theirs() -> Any:
        async def body() -> Any:
            for n in range(events):
                yield ServerSentEvent(data=f'{{"n": {n}}}', event="attempt")

        return EventSourceResponse(body(), ping=15)

    timings: dict[str, list[float]] = {"ours": [], "sse-starlette": []}
    for _ in range(runs):
        for name, make in (("ours", ours), ("sse-starlette", theirs)):
            started = time.perf_counter()
            asyncio.run(_drive(asyncio.run(make())))
            timings[name].append(time.perf_counter() - started)
    for name, samples in timings.items():
        print(f"SSE, {events} events, {name}: {_figures(samples)}")


def request_ids() -> None:
    """What each does with an X-Request-ID it does not accept."""
    from asgi_correlation_id import CorrelationIdMiddleware
    from starlette.responses import PlainTextResponse

    from external_query_service.server._correlation import RequestIds

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse("ok")(scope, receive, send)

    bad = "x" * 300
    for name, wrapped in (
        ("ours", RequestIds(app)),
        ("asgi-correlation-id", CorrelationIdMiddleware(app)),
    ):
        seen: list[dict[str, Any]] = []

        async def send(message: dict[str, Any], seen: list[dict[str, Any]] = seen) -> None:
            seen.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        scope = {
            "type": "http",
            "method": "GET",
            "path": "/",
            "headers": [(b"x-request-id", bad.encode())],
            "query_string": b"",
        }
        asyncio.run(wrapped(scope, receive, send))
        start = seen[0]
        echoed = dict(start["headers"]).get(b"x-request-id", b"").decode()
        print(
            f"request id of 300 characters, {name}: {start['status']}, "
            f"X-Request-ID {'kept' if echoed == bad else 'replaced' if echoed else 'absent'}"
        )


def hosts() -> None:
    """What each answers a Host it does not serve."""
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.responses import PlainTextResponse

    from external_query_service.server._hosts import HostAllowList

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse("ok")(scope, receive, send)

    for name, wrapped in (
        ("ours", HostAllowList(app, allowed=(), count=lambda _reason: None)),
        ("TrustedHostMiddleware", TrustedHostMiddleware(app, allowed_hosts=["localhost"])),
    ):
        seen: list[dict[str, Any]] = []

        async def send(message: dict[str, Any], seen: list[dict[str, Any]] = seen) -> None:
            seen.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        for host in (b"rebound.example", b"10.0.0.5:8080"):
            seen.clear()
            scope = {
                "type": "http",
                "method": "GET",
                "path": "/",
                "headers": [(b"host", host)],
                "query_string": b"",
                "server": ("10.0.0.5", 8080),  # the address the connection arrived at
            }
            asyncio.run(wrapped(scope, receive, send))
            kind = dict(seen[0]["headers"]).get(b"content-type", b"").decode()
            print(f"Host {host.decode()}, {name}: {seen[0]['status']} {kind} {seen[1]['body']!r}")


def imports(runs: int) -> None:
    """A fresh interpreter importing each model client."""
    modules = {"ours (llm._client)": "external_query_service.llm._client", "openai": "openai"}
    timings: dict[str, list[float]] = {name: [] for name in modules}
    for _ in range(runs):
        for name, module in modules.items():
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
            timings[name].append(time.perf_counter() - started)
    base = statistics.median(timings["ours (llm._client)"])
    for name, samples in timings.items():
        print(f"import {name}: {_figures(samples)}")
    print(f"openai costs {(statistics.median(timings['openai']) - base) * 1000:.0f} ms more")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    rate_limits()
    sse(args.runs)
    request_ids()
    hosts()
    imports(args.runs)


if __name__ == "__main__":
    main()
