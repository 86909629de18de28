"""``external-query serve`` under many clients at once, beside the same load in-process.

The world is ``e2e_latency.py``'s: a search engine that answers after ``--search-ms`` and
``--pages`` pages on sites of their own, each after ``--page-ms``. The server runs in a child
process (its own interpreter, as in production) on 127.0.0.1; ``--clients`` async httpx
clients on one connection pool send ``--questions`` questions in all, each client one after
another, within ``--limit-s`` seconds. The same questions are then run in this process with
``service.aanswer`` by as many concurrent tasks. Printed for each: errors (HTTP status other
than 200, transport errors, exceptions), throughput, p50/p95/max latency and the outcomes.

    python bench/serve_load.py [--clients 50] [--questions 400] [--limit-s 120]
        [--search-ms 200] [--page-ms 300] [--pages 3] [--max-concurrent 64]
        [--workers N [--redis redis://127.0.0.1:6379/0]]

With ``--workers N`` (N > 1) the in-process run is replaced by a comparison: the same load
against ``external-query serve --workers 1`` and then ``--workers N`` (the CLI in a child
process, both with the Redis cache under a fresh key prefix, deleted afterwards); printed
for each as above, then the throughput ratio N:1 and both p95s. Each question is distinct
(its number is part of it), so every one analyses its pages again: the work is CPU-bound,
as a real server's is, and the figure says what N processes buy on this machine.

``--compare-access`` runs the HTTP load twice against a server in a child process: open,
then with an API key (``api_key_hashes``) and a per-key rate limit too high to refuse any
(``requests_per_minute``), so the figure is what checking keys and spending tokens cost.
``--compare-stream`` runs it as plain JSON answers, then as Server-Sent Events
(``"stream": true``, read to the ``answer`` event): the difference is the streaming
overhead per answer.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from typing import Any

import httpx
from e2e_latency import QUESTION, build

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service.testing import World
from external_query_service.testing.world_files import dump_toml

NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
_CLI = (sys.executable, "-m", "external_query_service.cli")


@dataclass
class Run:
    latencies: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    wall: float = 0.0

    def report(self, title: str) -> None:
        done = len(self.latencies)
        ordered = sorted(self.latencies)
        p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)] if ordered else 0.0
        print(f"{title}:")
        print(
            f"  {done} answered in {self.wall:.1f} s: {done / self.wall:.1f} questions/s; "
            f"errors: {sum(self.errors.values())} {dict(self.errors) or ''}"
        )
        if ordered:
            print(
                f"  latency p50 {statistics.median(ordered) * 1000:.0f} ms, "
                f"p95 {p95 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"
            )
        print(f"  outcomes: {dict(self.outcomes)}")


Ask = Callable[[str], Awaitable[str]]


async def drive(ask: Ask, clients: int, questions: int, limit_s: float) -> Run:
    """``clients`` workers share ``questions`` questions, each asking one after another."""
    run = Run()
    numbers = iter(range(questions))
    stop_at = time.monotonic() + limit_s

    async def worker() -> None:
        for number in numbers:
            if time.monotonic() > stop_at:
                return
            started = time.perf_counter()
            try:
                outcome = await ask(f"{QUESTION}（{number}）")
            except Exception as exc:  # counted, never fatal: the figure is the error count
                run.errors[type(exc).__name__] += 1
                continue
            if outcome.startswith("HTTP "):
                run.errors[outcome] += 1
                continue
            run.latencies.append(time.perf_counter() - started)
            run.outcomes[outcome] += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    run.wall = time.perf_counter() - started
    return run


def _serve_child(settings: dict[str, Any], pipe: Connection) -> None:
    """The server process: serve until the parent says stop, then shut down gracefully."""
    from external_query_service.server import ServerThread

    service = ExternalQueryService(Settings.from_mapping(settings), clock=fixed_clock(NOW))
    with ServerThread(service) as server:
        pipe.send(server.url)
        pipe.recv()


async def over_http(
    url: str,
    args: argparse.Namespace,
    *,
    headers: dict[str, str] | None = None,
    stream: bool = False,
) -> Run:
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(
        base_url=url, limits=limits, timeout=60, headers=headers or {}
    ) as client:

        async def ask(question: str) -> str:
            if stream:
                return await _streamed(client, question)
            reply = await client.post("/v1/answer", json={"question": question})
            if reply.status_code != 200:
                return f"HTTP {reply.status_code}"
            return _outcome(reply.json())

        await ask(QUESTION)  # warm-up: imports, OpenCC tables, trafilatura, connections
        return await drive(ask, args.clients, args.questions, args.limit_s)


def _outcome(body: dict[str, Any]) -> str:
    return str(body["status"] + (f" ({body['reason']})" if body["reason"] else ""))


async def _streamed(client: httpx.AsyncClient, question: str) -> str:
    """One streamed answer, read to its last event."""
    body = {"question": question, "stream": True}
    async with client.stream("POST", "/v1/answer", json=body) as reply:
        if reply.status_code != 200:
            return f"HTTP {reply.status_code}"
        last = ""
        async for line in reply.aiter_lines():
            if line.startswith("event: "):
                last = line.removeprefix("event: ")
            elif line.startswith("data: ") and last in ("answer", "error"):
                data = json.loads(line.removeprefix("data: "))
                return _outcome(data) if last == "answer" else f"HTTP error {data}"
    return "HTTP stream ended early"


def _child_run(settings: Settings, args: argparse.Namespace, **http: Any) -> tuple[Run, int | None]:
    """The HTTP load against ``settings`` served in a child process."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=_serve_child, args=(settings.model_dump(mode="json"), child))
    server.start()
    try:
        url = parent.recv()
        run = asyncio.run(over_http(url, args, **http))
    finally:
        parent.send("stop")
        server.join(60)
    return run, server.exitcode


_BENCH_KEY = "bench-key-0123456789abcdef"


def _compare(settings: Settings, args: argparse.Namespace) -> None:
    """Open vs keys and limits (``--compare-access``), or JSON vs SSE (``--compare-stream``)."""
    if args.compare_access:
        digest = "sha256:" + hashlib.sha256(_BENCH_KEY.encode()).hexdigest()
        guarded = settings.server.model_copy(
            update={"api_key_hashes": (digest,), "requests_per_minute": 1_000_000}
        )
        variants = {
            "open (no keys, no limits)": (settings, {}),
            "API key + rate limit": (
                settings.model_copy(update={"server": guarded}),
                {"headers": {"X-API-Key": _BENCH_KEY}},
            ),
        }
    else:
        variants = {"JSON answers": (settings, {}), "streamed (SSE)": (settings, {"stream": True})}
    # Twice over, reporting the second round: the first warms the world's process and the
    # machine's caches, which would otherwise favour whichever variant runs second.
    for _ in range(2):
        runs = {
            title: _child_run(served, args, **http)[0] for title, (served, http) in variants.items()
        }
    for title, run in runs.items():
        run.report(f"serve, {title}")
    (first, one), (second, other) = runs.items()
    ratio = (len(other.latencies) / other.wall) / (len(one.latencies) / one.wall)
    extra = statistics.median(other.latencies) - statistics.median(one.latencies)
    print(
        f"throughput {second} / {first} = {ratio:.3f}; median latency "
        f"{extra * 1000:+.1f} ms per answer"
    )


async def in_process(settings: Settings, args: argparse.Namespace) -> Run:
    async with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:

        async def ask(question: str) -> str:
            answer = await service.aanswer(question)
            return answer.status + (f" ({answer.reason})" if answer.reason else "")

        await ask(QUESTION)
        return await drive(ask, args.clients, args.questions, args.limit_s)


def _serve_cli(settings: Settings, workers: int, folder: str) -> tuple[subprocess.Popen[str], str]:
    """``external-query serve --workers N`` on a free port; the process and its URL once every
    worker has started."""
    config = os.path.join(folder, f"serve-{workers}.toml")
    with open(config, "w", encoding="utf-8") as file:
        file.write(dump_toml(settings.model_dump(mode="json", exclude_none=True)))
    process = subprocess.Popen(
        [*_CLI, "serve", "--config", config, "--port", "0", "--workers", str(workers)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    url = ""
    started = 0
    while started < workers:
        line = process.stderr.readline()
        if not line:
            raise SystemExit(f"serve --workers {workers} ended before it started")
        found = re.search(r"Serving on (http://\S+)", line)
        url = found.group(1) if found else url
        started += "Application startup complete" in line
    stream = process.stderr
    threading.Thread(target=lambda: stream.read(), daemon=True).start()  # keep it drained
    return process, url


def _compare_workers(settings: Settings, args: argparse.Namespace) -> None:
    """The same load against ``serve --workers 1`` and ``--workers N``."""
    import redis

    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    runs: dict[int, Run] = {}
    with tempfile.TemporaryDirectory() as folder:
        for workers in (1, args.workers):
            cache = settings.cache.model_copy(
                # Unsigned: the bench compares worker counts on a private Redis.
                update={
                    "url": args.redis,
                    "key_prefix": f"{prefix}{workers}:",
                    "allow_unsigned": True,
                }
            )
            process, url = _serve_cli(settings.model_copy(update={"cache": cache}), workers, folder)
            try:
                runs[workers] = asyncio.run(over_http(url, args))
            finally:
                process.terminate()
                process.wait(60)
    client = redis.Redis.from_url(args.redis)
    for key in client.scan_iter(match=prefix + "*", count=500):
        client.delete(key)
    client.close()
    for workers, run in runs.items():
        run.report(f"serve --workers {workers} (HTTP, Redis cache)")
    one, many = runs[1], runs[args.workers]
    ratio = (len(many.latencies) / many.wall) / (len(one.latencies) / one.wall)
    print(
        f"throughput {args.workers}:1 = {ratio:.2f}; p95 {_p95(one) * 1000:.0f} ms with 1 worker, "
        f"{_p95(many) * 1000:.0f} ms with {args.workers}"
    )


def _p95(run: Run) -> float:
    ordered = sorted(run.latencies)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)] if ordered else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--limit-s", type=float, default=120.0)
    parser.add_argument("--search-ms", type=int, default=200)
    parser.add_argument("--page-ms", type=int, default=300)
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--max-concurrent", type=int, default=64)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--compare-access", action="store_true")
    group.add_argument("--compare-stream", action="store_true")
    args = parser.parse_args()

    with World() as world:
        settings = build(world, args.pages, args.search_ms, args.page_ms)
        network = settings.network.model_copy(
            update={"max_concurrent_questions": args.max_concurrent}
        )
        settings = settings.model_copy(update={"network": network})
        if args.workers > 1:
            print(
                f"{args.clients} clients, {args.questions} distinct questions; world: search "
                f"{args.search_ms} ms + {args.pages} pages at {args.page_ms} ms"
            )
            _compare_workers(settings, args)
            return
        if args.compare_access or args.compare_stream:
            print(
                f"{args.clients} clients, {args.questions} questions; world: search "
                f"{args.search_ms} ms + {args.pages} pages at {args.page_ms} ms"
            )
            _compare(settings, args)
            return
        served, exit_code = _child_run(settings, args)
        direct = asyncio.run(in_process(settings, args))

    critical = (args.search_ms + args.page_ms) / 1000
    print(
        f"{args.clients} clients, {args.questions} questions; world: search {args.search_ms} ms "
        f"+ {args.pages} pages at {args.page_ms} ms (critical path {critical * 1000:.0f} ms); "
        f"max_concurrent_questions {args.max_concurrent}"
    )
    served.report("serve (HTTP, server in a child process)")
    direct.report("in-process (service.aanswer, same questions)")
    print(f"server exit code: {exit_code}")


if __name__ == "__main__":
    main()
