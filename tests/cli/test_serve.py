"""``external-query serve``: a real process on loopback, stopped by a signal; bad input and a
missing extra are one line on stderr and exit 2."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from external_query_service.cli import main
from tests.support.paths import REPO
from tests.support.serving import DOCS, DOCS_QUESTION, write_docs

ROOT = REPO


def test_a_missing_server_extra_is_one_line_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "fastapi", None)  # what an uninstalled package looks like
    assert main(["serve", "--docs", str(write_docs(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert err == (
        "external-query: error: the HTTP server needs the optional 'fastapi' package: "
        "pip install 'external_query_service[server]'\n"
    )


def test_an_address_in_use_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("uvicorn")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        code = main(["serve", "--docs", str(write_docs(tmp_path)), "--port", str(port)])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"external-query: error: cannot listen on 127.0.0.1:{port}: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve"], "no data source is configured"),
        (["serve", "--docs", "x", "--port", "70000"], "not a port number"),
        (["serve", "--config", "no-such.toml"], "settings file not found"),
    ],
)
def test_bad_serve_flags_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("uvicorn")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``external-query serve --docs`` in a process of its own on a free port; yields it and
    its URL (read from its first log line)."""
    docs = write_docs(tmp_path / "docs")
    with served(tmp_path, ["serve", "--docs", str(docs), "--port", "0"]) as running:
        yield running


@contextlib.contextmanager
def served(
    tmp_path: Path, command: list[str], log: list[str] | None = None, url: str | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``external-query`` running ``command`` (a ``serve``) in a process of its own, once it
    answers: the process and its URL (``url``, or read from its log). ``log`` receives every
    stderr line."""
    pytest.importorskip("uvicorn")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "external_query_service.cli", *command],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    stderr = process.stderr
    assert stderr is not None

    def read() -> None:
        for line in stderr:
            lines.put(line)
            if log is not None:
                log.append(line)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        while url is None:
            found = re.search(r"Serving on (http://\S+)", lines.get(timeout=60))
            url = found.group(1) if found else None
        with httpx.Client(base_url=url) as client:
            for _ in range(600):  # the socket is bound before the log line; wait for startup
                try:
                    client.get("/healthz")
                    break
                except httpx.TransportError:
                    threading.Event().wait(0.05)
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)
        reader.join(10)
        stderr.close()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_answers_over_http_and_a_signal_stops_it_with_exit_0(
    serving: tuple[subprocess.Popen[str], str], stop: signal.Signals
) -> None:
    process, url = serving
    reply = httpx.post(
        f"{url}/v1/answer", json={"question": DOCS_QUESTION, "semantics": DOCS}, timeout=30
    )
    assert reply.status_code == 200
    assert reply.json()["status"] == "answered"
    process.send_signal(stop)
    assert process.wait(30) == 0


WORLD = ROOT / "examples" / "cases" / "worlds" / "zhanjiang-weather"


def test_serve_world_answers_from_the_replayed_world_on_its_clock(tmp_path: Path) -> None:
    command = ["serve", "--world", str(WORLD), "--port", "0"]
    with served(tmp_path, command) as (process, url):
        reply = httpx.post(
            f"{url}/v1/answer",
            json={
                "question": "湛江明天天气怎么样？",
                "semantics": {
                    "query_kind": "weather",
                    "location": "湛江",
                    "time_range": {"start": "2026-12-01", "end": "2026-12-01"},
                },
            },
            timeout=30,
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == "answered"  # the recorded clock makes 2026-12-01 tomorrow


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--config", "x.toml"], "--world brings its own settings; drop --config"),
        (["--workers", "2"], "--world serves from one process; drop --workers"),
    ],
    ids=["config", "workers"],
)
def test_serve_world_refuses_what_it_cannot_honour(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("uvicorn")
    assert main(["serve", "--world", str(WORLD), *extra]) == 2
    assert capsys.readouterr().err == f"external-query: error: {message}\n"


def served_log(tmp_path: Path, *flags: str) -> tuple[list[str], list[str]]:
    """``serve --docs`` with ``flags``: asked one question and one health check whose query
    carries a key, then stopped. Its stderr lines, and the two requests' ids."""
    docs = write_docs(tmp_path / "docs")
    log: list[str] = []
    with socket.socket() as probe:  # a free port, named: a quiet log may not say it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = ["serve", "--docs", str(docs), "--port", str(port), *flags]
    with served(tmp_path, command, log, f"http://127.0.0.1:{port}") as (process, url):
        answered = httpx.post(
            f"{url}/v1/answer", json={"question": DOCS_QUESTION, "semantics": DOCS}, timeout=30
        )
        health = httpx.get(f"{url}/healthz?api_key=s3cret-key&offset=3", timeout=30)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    assert answered.status_code == 200
    return log, [answered.headers["X-Request-ID"], health.headers["X-Request-ID"]]


def test_json_logs_are_one_stream_with_the_request_id_on_the_access_line(tmp_path: Path) -> None:
    log, (asked, checked) = served_log(tmp_path, "--log-format", "json")
    lines = [json.loads(line) for line in log]  # every line is one JSON object
    access = [line for line in lines if line["logger"].endswith(".access")]
    answers = [line for line in lines if line["logger"].endswith(".answers")]
    post = next(line for line in access if line["method"] == "POST")
    assert (post["path"], post["status"], post["request_id"]) == ("/v1/answer", 200, asked)
    assert [line["request_id"] for line in answers] == [asked]  # tied to its access line
    assert answers[0]["status"] == "answered"
    health = next(line for line in access if line["request_id"] == checked)
    assert health["path"] == "/healthz?[query redacted]"
    assert "s3cret-key" not in "".join(log)
    assert {line["level"] for line in lines} == {"info"}
    assert any(line["message"].startswith("Serving on") for line in lines if "message" in line)


def test_text_logs_carry_the_request_id_on_the_access_line(tmp_path: Path) -> None:
    log, (asked, _checked) = served_log(tmp_path)
    access = [line for line in log if '"POST /v1/answer HTTP/1.1" 200' in line]
    assert len(access) == 1
    assert access[0].rstrip().endswith(f"request_id={asked}")
    assert "s3cret-key" not in "".join(log)


def test_log_level_warning_leaves_out_the_access_and_answer_lines(tmp_path: Path) -> None:
    log, _ids = served_log(tmp_path, "--log-level", "warning", "--log-format", "json")
    loggers = {json.loads(line)["logger"] for line in log}
    assert not {name for name in loggers if name.endswith((".access", ".answers"))}
    assert not [line for line in log if "Serving on" in line]
