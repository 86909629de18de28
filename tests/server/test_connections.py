"""Connections that cannot hold the service hostage: ``serve`` in a process limited to 1,024
file descriptors, 1,050 idle sockets from one client, and a normal request still answers
while the log stays small."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import resource
import select
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from external_query_service import Settings
from external_query_service.testing.world_files import dump_toml
from tests.support.paths import REPO
from tests.support.serving import CLI, DOCS, DOCS_QUESTION, write_docs

ROOT = REPO
IDLE = 1050


def _at_most_1024_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


@contextlib.contextmanager
def _serving(
    tmp_path: Path, server: dict[str, object]
) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """``serve`` in a process limited to 1,024 files, with ``server`` settings: yields its URL,
    its log file and the process, and stops it on the way out."""
    pytest.importorskip("uvicorn")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if min(soft, hard) < IDLE + 100:
        pytest.skip(f"this test process may open only {soft} files")
    settings = Settings.from_mapping({"server": server, "analysis": {"processes": 0}}).with_docs(
        write_docs(tmp_path / "docs")
    )
    config = tmp_path / "serve.toml"
    config.write_text(dump_toml(settings.model_dump(mode="json", exclude_none=True)), "utf-8")
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*CLI, "serve", "--config", str(config), "--port", "0"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=_at_most_1024_files,
        )
    try:
        url = _served_url(log_path, process)
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
        yield url, log_path, process
    finally:
        process.terminate()
        process.wait(60)


def _idle_sockets(url: str, count: int) -> list[socket.socket]:
    """``count`` connections to ``url`` that never send a byte."""
    port = int(url.rsplit(":", 1)[1])
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]


def _ask(url: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    reply = httpx.post(
        f"{url}/v1/answer", json={"question": DOCS_QUESTION, "semantics": DOCS}, timeout=60
    )
    return reply, time.monotonic() - started


def test_a_thousand_idle_sockets_do_not_stop_a_normal_request(tmp_path: Path) -> None:
    idle: list[socket.socket] = []
    with _serving(tmp_path, {"header_timeout_s": 2.0}) as (url, log_path, _):
        try:
            idle = _idle_sockets(url, IDLE)
            reply, waited = _ask(url)
            assert reply.status_code == 200, reply.text
            assert reply.json()["status"] == "answered"
            assert waited < 30
            time.sleep(1)
        finally:
            for item in idle:
                item.close()
    size = log_path.stat().st_size
    text = log_path.read_text("utf-8", errors="replace")
    assert size < 1_000_000, text[-2000:]
    assert "Traceback" not in text
    assert len(re.findall(r"could not accept", text)) <= 1  # one line a minute, with a count


@pytest.mark.parametrize("burst", [False, True], ids=["one_by_one", "accepted_in_one_burst"])
def test_idle_sockets_at_the_connection_limit_make_room_for_a_request(
    tmp_path: Path, burst: bool
) -> None:
    """With more idle sockets than ``limit_concurrency`` and a header deadline far away, a
    request is still answered: the longest-waiting idle connections are closed for it, just
    enough of them. With the server stopped while the sockets connect, the kernel queues them
    all and the server accepts them in one burst, before any close has been completed."""
    limit, header_timeout_s = 40, 120.0
    idle: list[socket.socket] = []
    server = {"header_timeout_s": header_timeout_s, "limit_concurrency": limit}
    with _serving(tmp_path, server) as (url, _, process):
        try:
            if burst:
                process.send_signal(signal.SIGSTOP)
            try:
                idle = _idle_sockets(url, limit + 20)
            finally:
                if burst:
                    process.send_signal(signal.SIGCONT)
            reply, waited = _ask(url)
            assert reply.status_code == 200, reply.text
            assert reply.json()["status"] == "answered"
            assert waited < header_timeout_s / 2  # not freed by the header deadline
            readable, _, _ = select.select(idle, [], [], 1.0)
            closed = sum(item.recv(1) == b"" for item in readable)  # the end of the stream
            # Room for the request: limit - 1 connections open with it, so limit - 2 idle.
            assert closed == len(idle) - (limit - 2)
        finally:
            for item in idle:
                item.close()


def _served_url(log_path: Path, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = re.search(r"Serving on (http://\S+)", log_path.read_text("utf-8", errors="replace"))
        if found:
            url = found.group(1)
            while time.monotonic() < deadline:
                try:
                    httpx.get(f"{url}/healthz", timeout=5)
                    return url
                except httpx.TransportError:
                    time.sleep(0.05)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(log_path.read_text("utf-8", errors="replace"))


def test_failed_accepts_are_one_line_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("uvicorn")
    import asyncio
    import errno

    from external_query_service.server._connections import limit_accept_errors

    loop = asyncio.new_event_loop()
    others: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: others.append(context))
    try:
        limit_accept_errors(loop, interval_s=3600)
        failed = OSError(errno.EMFILE, "Too many open files")
        with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
            for _ in range(500):
                loop.call_exception_handler(
                    {"message": "socket.accept() out of system resource", "exception": failed}
                )
            loop.call_exception_handler({"message": "something else"})
    finally:
        loop.close()
    lines = [record.getMessage() for record in caplog.records]
    assert lines == ["could not accept 1 connection(s) since the last report: Too many open files"]
    assert others == [{"message": "something else"}]  # other errors go where they went
