from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import settings

from external_query_service.storage import LedgerTarget, migrate_ledger, open_ledger
from external_query_service.testing import LoopbackServer, World
from tests.support.llm_chat import ChatServer
from tests.support.services import REQUIRE_SERVICES, service_missing

# Property tests judge what a function returns, never how long it took: hypothesis's
# per-example deadline (200 ms) failed them on a loaded host (the first traditional-Chinese
# example loads OpenCC's dictionaries). Speed is measured by the benches.
settings.register_profile("project", deadline=None)
settings.load_profile("project")

#: The PostgreSQL database tests make their schemas in, and the Redis server they use.
POSTGRES_URL = os.environ.get(
    "EXTERNAL_QUERY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("EXTERNAL_QUERY_TEST_REDIS", "redis://127.0.0.1:6379/0")


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    """A started loopback server on 127.0.0.1 (routes by Host header and path)."""
    with LoopbackServer() as server:
        yield server


@pytest.fixture
def world(loopback: LoopbackServer) -> World:
    """A loopback world (search engine, pages, APIs) on ``loopback``; a module that needs
    another clock or routes ready-made defines its own."""
    return World(loopback)


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    """A started loopback chat completions endpoint that replies from a script."""
    with ChatServer() as server:
        yield server


@pytest.fixture(scope="module")
def module_server() -> Iterator[LoopbackServer]:
    """One loopback server for a whole test module. Stopping a server waits out
    serve_forever's poll, which per test would double a busy module's run time."""
    with LoopbackServer() as server:
        yield server


@pytest.fixture
def shared_loopback(module_server: LoopbackServer) -> LoopbackServer:
    """The module's server with an empty request log. Its routes stay from test to test, so
    a module that uses it routes its own paths before each request (a module opts in by
    making its ``loopback`` this one)."""
    module_server.requests.clear()
    return module_server


#: How ``pytest.importorskip`` words its skip: an optional package is not installed.
_IMPORT_SKIP = re.compile(r"(Skipped: )?could not import '([\w.]+)'")
#: The frameworks of the integrations run, never part of ``.[dev]``: their skips stay skips.
_OUTSIDE_DEV = frozenset({"langchain_core", "llama_index"})


def _extra_required(report: pytest.CollectReport | pytest.TestReport) -> None:
    """Where ``EXTERNAL_QUERY_REQUIRE_SERVICES=1``, a skip for a package that is not
    installed (``pytest.importorskip``, in a module, fixture or test) fails instead: CI
    installs ``.[dev]``, so such a skip means an extra went missing (the integrations'
    frameworks aside)."""
    if not report.skipped or os.environ.get(REQUIRE_SERVICES, "") in ("", "0"):
        return
    longrepr = report.longrepr
    message = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    missing = _IMPORT_SKIP.match(message)
    if missing and missing[2].split(".")[0] not in _OUTSIDE_DEV:
        report.outcome = "failed"
        report.longrepr = f"{message} ({REQUIRE_SERVICES} is set: every extra is required)"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _extra_required(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _extra_required(report)
    return report


@pytest.fixture(scope="session")
def https_worlds() -> None:
    """For a test whose world serves https URLs (the shipped example worlds do): the world's
    throwaway CA needs trustme (the ``testing`` extra), else a skip."""
    pytest.importorskip("trustme")


@pytest.fixture(scope="session")
def chromium() -> str:
    """The system Chromium the browser tests drive (with Playwright installed), else a skip
    (a failure where ``EXTERNAL_QUERY_REQUIRE_SERVICES=1``)."""
    from external_query_service.browser import find_executable
    from external_query_service.errors import BrowserUnavailable
    from external_query_service.settings import BrowserSettings

    try:
        import playwright  # noqa: F401
    except ImportError:
        service_missing("Chromium", "playwright is not installed (pip install -e '.[dev]')")
    try:
        return find_executable(BrowserSettings())
    except BrowserUnavailable as exc:
        service_missing("Chromium", str(exc))


@pytest.fixture(scope="session")
def postgres_database() -> str:
    """The test database's URL, once it answered a connection (checked once a session)."""
    try:
        import psycopg
    except ImportError:
        service_missing("PostgreSQL", "psycopg is not installed (pip install -e '.[dev]')")
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=5).close()
    except psycopg.Error as exc:
        service_missing("PostgreSQL", f"{POSTGRES_URL} does not answer: {exc}")
    return POSTGRES_URL


@pytest.fixture
def postgres_url(postgres_database: str) -> Iterator[str]:
    """A URL whose ``options=-csearch_path`` selects a fresh, empty schema of this test's
    own (dropped afterwards): tests never see each other's tables, also under xdist."""
    import psycopg
    from psycopg import sql

    schema = f"eq_test_{uuid.uuid4().hex[:16]}"
    name = sql.Identifier(schema)
    with psycopg.connect(postgres_database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(name))
    joiner = "&" if "?" in postgres_database else "?"
    try:
        yield f"{postgres_database}{joiner}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(postgres_database, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(name))


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_target(request: pytest.FixtureRequest, tmp_path: Path) -> LedgerTarget:
    """A migrated, empty ledger on each backend: a SQLite file, then a PostgreSQL schema of
    the test's own."""
    if request.param == "sqlite":
        path = tmp_path / "data" / "ledger.sqlite3"
        path.parent.mkdir()  # a ledger file is made only in a folder that exists
        open_ledger(path).close()
        return path
    url: str = request.getfixturevalue("postgres_url")
    migrate_ledger(url)
    return url


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test Redis server's URL, once it answered ``PING`` (checked once a session); a
    skip without the ``redis`` extra, which every shared-cache test drives."""
    pytest.importorskip("redis")
    parts = urlsplit(REDIS_URL)
    address = (parts.hostname or "127.0.0.1", parts.port or 6379)
    try:
        with socket.create_connection(address, timeout=5) as sock:
            sock.sendall(b"PING\r\n")
            answer = sock.recv(64)
    except OSError as exc:
        service_missing("Redis", f"{REDIS_URL} does not answer: {exc}")
    if not answer.startswith(b"+PONG"):
        service_missing("Redis", f"{REDIS_URL} answered {answer!r} to PING")
    return REDIS_URL


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A Redis key prefix of this test's own; its keys are deleted afterwards."""
    name = f"eq-test-{uuid.uuid4().hex[:12]}:"
    yield name
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=name + "*", count=500):
            client.delete(key)
    finally:
        client.close()
