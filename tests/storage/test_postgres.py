"""The PostgreSQL ledger: many processes append to one chain with no gap, the URL reaches
libpq unchanged, appends wait on one advisory lock, the schema is only ever created by
migrate, and a SQLite ledger copies into it verified. Runs on the real server (skipped
without one, failed in CI: see conftest.py)."""

# ruff: noqa: E402 (imports after the extra's importorskip)

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.synchronize
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

# The whole file drives the postgres extra (psycopg), its ledger module included.
psycopg = pytest.importorskip("psycopg")

from psycopg import sql

from external_query_service import ExternalQueryService, Settings
from external_query_service.admission import content_id
from external_query_service.storage import (
    LedgerError,
    SQLiteLedger,
    UnsoundLedger,
    copy_ledger_to,
    migrate_ledger,
    open_ledger,
    show_target,
)
from external_query_service.storage._postgres import LOCK_CLASS, PostgresLedger
from tests.support.ledger_records import (
    OBJECTIVE,
    SOURCES,
    admitted,
    make_chain,
    make_plan,
    make_receipt,
)
from tests.support.paths import REPO

REPO = REPO
DOCS = {"query_kind": "documentation"}
WRITERS = 4
#: Each writer's answers: the writers start appending together (a barrier, past their slow
#: interpreter start), so every one of them contends for the lock from its first answer on.
ANSWERS_EACH = 100


def append_answers(
    url: str, writer: int, count: int, start: multiprocessing.synchronize.Barrier
) -> None:
    """One writer process: ``count`` answers, each its own chain (four records), once every
    writer has its ledger open."""
    with open_ledger(url) as ledger:
        start.wait(60)
        for n in range(count):
            results = ledger.persist_chain(make_chain(f"Writer {writer} question {n}"))
            assert all(item.inserted for item in results)


def test_four_processes_appending_at_once_leave_one_gap_free_chain(postgres_url: str) -> None:
    migrate_ledger(postgres_url)
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(WRITERS)
    writers = [
        spawn.Process(target=append_answers, args=(postgres_url, writer, ANSWERS_EACH, start))
        for writer in range(WRITERS)
    ]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=120)
    assert [process.exitcode for process in writers] == [0] * WRITERS
    with open_ledger(postgres_url) as ledger:
        check = ledger.verify()
        assert check.ok, check
        assert ledger.count("chain") == WRITERS * ANSWERS_EACH
        assert check.records == 4 * WRITERS * ANSWERS_EACH
    with psycopg.connect(postgres_url) as conn:
        low, high, rows = conn.execute(
            "SELECT MIN(seq), MAX(seq), COUNT(*) FROM records"
        ).fetchone()  # type: ignore[misc]
        kinds = conn.execute("SELECT COUNT(DISTINCT digest) FROM records").fetchone()
    assert (low, high, rows) == (1, rows, 4 * WRITERS * ANSWERS_EACH)
    assert kinds == (rows,)


def test_the_urls_search_path_option_selects_the_schema_the_ledger_lives_in(
    postgres_url: str, postgres_database: str
) -> None:
    migrate_ledger(postgres_url)
    schema = postgres_url.rpartition("%3D")[2]
    with open_ledger(postgres_url) as ledger:
        ledger.record("chain", content_id({"n": 1}), {"n": 1})
    with psycopg.connect(postgres_database) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "ORDER BY table_name",
            (schema,),
        ).fetchall()
        stored = conn.execute(
            sql.SQL("SELECT COUNT(*) FROM {}.records").format(sql.Identifier(schema))
        ).fetchone()
        public = conn.execute("SELECT to_regclass('public.records')").fetchone()
    assert [name for (name,) in tables] == ["meta", "project_sources", "projects", "records"]
    assert stored == (1,)
    assert public == (None,)


def test_two_schemas_are_two_ledgers(postgres_url: str, postgres_database: str) -> None:
    other_schema = postgres_url.rpartition("%3D")[2] + "_b"
    with psycopg.connect(postgres_database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(other_schema)))
    other = postgres_url.rpartition("%3D")[0] + "%3D" + other_schema
    try:
        for url in (postgres_url, other):
            migrate_ledger(url)
        with open_ledger(postgres_url) as first, open_ledger(other) as second:
            first.record("chain", content_id({"n": 1}), {"n": 1})
            assert (first.count(), second.count()) == (1, 0)
            # Each ledger's appends lock its own schema: holding one does not stop the other.
            assert second.record("chain", content_id({"n": 2}), {"n": 2}).seq == 1
    finally:
        with psycopg.connect(postgres_database, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(other_schema)))


def test_an_append_waits_for_the_ledgers_advisory_lock_and_gives_up_as_busy(
    postgres_url: str,
) -> None:
    migrate_ledger(postgres_url)
    with PostgresLedger(postgres_url, lock_timeout_ms=300) as ledger:
        ledger.record("chain", content_id({"n": 1}), {"n": 1})
        with psycopg.connect(postgres_url) as holder:
            # Another process in the middle of an append: it holds the same lock.
            holder.execute(
                "SELECT pg_advisory_xact_lock(%s, (SELECT oid::int FROM pg_namespace "
                "WHERE nspname = current_schema()))",
                (LOCK_CLASS,),
            )
            with pytest.raises(LedgerError) as caught:
                ledger.record("chain", content_id({"n": 2}), {"n": 2})
            holder.rollback()
        assert (caught.value.reason, caught.value.retryable) == ("ledger_busy", True)
        # The refused append left nothing behind; once the lock is free it appends.
        assert ledger.record("chain", content_id({"n": 2}), {"n": 2}).seq == 2
        assert ledger.verify().ok


def test_opening_never_creates_the_schema(postgres_url: str, postgres_database: str) -> None:
    for _ in range(2):
        with pytest.raises(LedgerError) as caught:
            open_ledger(postgres_url)
        assert caught.value.reason == "ledger_needs_migration"
    schema = postgres_url.rpartition("%3D")[2]
    with psycopg.connect(postgres_database) as conn:
        tables = conn.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchone()
    assert tables == (0,)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_server_is_a_clean_error_that_never_shows_the_password() -> None:
    url = f"postgresql://ledger:s3cret@127.0.0.1:{closed_port()}/none?connect_timeout=2"
    with pytest.raises(LedgerError) as caught:
        open_ledger(url)
    assert caught.value.reason == "ledger_unavailable"
    assert "s3cret" not in str(caught.value)
    assert "ledger:***@127.0.0.1" in str(caught.value)
    assert show_target("postgresql://h/db?password=s3cret&sslmode=require") == (
        "postgresql://h/db?password=***&sslmode=require"
    )


def sqlite_with_answers(path: Path, answers: int) -> None:
    with SQLiteLedger(path) as ledger:
        for n in range(answers):
            ledger.persist_chain(make_chain(f"Copied question {n}"))
        plan = make_plan()
        receipt = make_receipt(plan)
        ledger.start_project("research", OBJECTIVE)
        ledger.write_readback("research", plan, receipt, admitted(plan, receipt, SOURCES[:2]))


def test_a_sqlite_ledger_copies_into_postgres_verified_and_copying_again_adds_nothing(
    postgres_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "ledger.sqlite3"
    sqlite_with_answers(source, 5)
    migrate_ledger(postgres_url)
    copied = copy_ledger_to(source, postgres_url)
    assert (copied.records_copied, copied.records) == (23, 23)  # 5 × 4 + plan, receipt, admission
    assert (copied.projects, copied.project_sources) == (1, 2)
    with SQLiteLedger(source) as original:
        expected = original.verify()
    assert copied.verification.ok
    assert copied.verification.last_chain == expected.last_chain
    again = copy_ledger_to(source, postgres_url)
    assert (again.records_copied, again.records) == (0, 23)
    # The copy keeps growing the same chain afterwards.
    with open_ledger(postgres_url) as ledger:
        assert ledger.project("research").source_count == 2  # type: ignore[union-attr]
        assert ledger.persist_chain(make_chain("After the copy"))[-1].seq == 27
        assert ledger.verify().ok


def test_copying_into_a_ledger_with_other_records_is_refused_whole(
    postgres_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "ledger.sqlite3"
    sqlite_with_answers(source, 2)
    migrate_ledger(postgres_url)
    with open_ledger(postgres_url) as ledger:
        ledger.persist_chain(make_chain("Someone else's answer"))
    with pytest.raises(LedgerError) as caught:
        copy_ledger_to(source, postgres_url)
    assert caught.value.reason == "ledger_copy_conflict"
    with open_ledger(postgres_url) as ledger:
        assert ledger.count() == 4


def test_an_unsound_source_is_never_copied(postgres_url: str, tmp_path: Path) -> None:
    source = tmp_path / "ledger.sqlite3"
    sqlite_with_answers(source, 1)
    with SQLiteLedger(source) as ledger:
        ledger._db.execute("UPDATE records SET body = body || ' ' WHERE seq = 3")
    migrate_ledger(postgres_url)
    with pytest.raises(UnsoundLedger) as caught:
        copy_ledger_to(source, postgres_url)
    assert caught.value.verification.first_bad_seq == 3
    with open_ledger(postgres_url) as ledger:
        assert ledger.count() == 0


def test_a_service_configured_with_a_url_persists_each_answer_there(postgres_url: str) -> None:
    migrate_ledger(postgres_url)
    settings = Settings.model_validate({"ledger": {"url": postgres_url}}).with_docs(
        REPO / "docs" / "architecture"
    )
    with ExternalQueryService(settings) as service:
        answer = service.answer("What does the verifier check?", DOCS)
    assert answer.admission.persisted
    with open_ledger(postgres_url) as ledger:
        assert all(ledger.has_record(plan_id) for plan_id in answer.admission.plan_ids)
        assert ledger.count("chain") == 1
        assert ledger.verify().ok


class Proxy:
    """A loopback TCP relay to the test server that can drop every connection and stop
    listening (a server outage, as the ledger sees it) and listen again on the same port."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = closed_port()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self._track(listener)
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
                server = socket.create_connection(self.upstream)
            except OSError:
                return
            for sock in (client, server):
                self._track(sock)
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def test_answers_go_on_while_the_database_is_away_and_persist_again_once_it_is_back(
    postgres_url: str,
) -> None:
    migrate_ledger(postgres_url)
    parts = urlsplit(postgres_url)
    proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    proxy.start()
    relayed = parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}").geturl()
    settings = Settings.model_validate({"ledger": {"url": relayed}}).with_docs(
        REPO / "docs" / "architecture"
    )
    try:
        with ExternalQueryService(settings) as service:
            before = service.answer("What does the verifier check?", DOCS)
            proxy.stop()
            during = service.answer("What does the ledger keep?", DOCS)
            proxy.start()
            after = service.answer("What does the presenter show?", DOCS)
    finally:
        proxy.stop()
    assert (before.admission.persisted, during.admission.persisted) == (True, False)
    assert during.admission.plan_ids  # the answer was bound as usual; only its write failed
    errors = [event for event in during.audit.events if event.event == "ledger_error"]
    assert [event.detail["reason"] for event in errors] == ["ledger_unavailable"]
    assert after.admission.persisted
    with open_ledger(postgres_url) as ledger:
        assert ledger.count("chain") == 2
        assert ledger.verify().ok
