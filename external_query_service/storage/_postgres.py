"""The shared ledger: one PostgreSQL schema that many processes, on one machine or many,
write at once (``[ledger] url = "postgresql://…"``). Needs the ``[postgres]`` extra.

Same records, ids, hash chain and rules as SQLite (``base.py``); only the storage differs:

- Serialised appends: every write transaction first takes a transaction-scoped advisory
  lock keyed on the ledger's schema (``pg_advisory_xact_lock``), so reading the last seq
  and appending the next one never interleave between processes; the lock is released by
  the commit or rollback, also when the writer's connection dies. Seq therefore has no
  gap (no database sequence, whose values a rollback would skip) and the ``PRIMARY KEY``
  refuses a second record at the same seq. Transactions run at READ COMMITTED, so the
  statements after the lock see every append committed before it.
- A writer that waits longer than ``lock_timeout_ms`` gets ``ledger_busy`` (retryable).
- The URL reaches libpq unchanged, query parameters included
  (``?options=-csearch_path%3Dledger`` selects the schema, ``?connect_timeout=5`` bounds
  connecting); passwords belong in libpq's environment or password file, and are never
  shown.
- The head (last seq, chain value, record count) is kept apart from the records, in the
  ``meta`` table under the key ``head``, sealed by its own digest (a write that would
  replace a head that does not verify is rolled back), and written in the
  same transaction as the records that moved it: it can never lag or lead the chain.
- The schema is created and migrated only by ``migrate()`` (``external-query ledger
  migrate``); opening checks its version and refuses a missing or older one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any

import psycopg
from psycopg import IsolationLevel, errors
from psycopg_pool import ConnectionPool, PoolTimeout

from .._clock import Clock, system_clock
from ._base import SCHEMA_V1, BaseLedger, Tx
from ._models import LedgerError, LedgerHead, show_target

__all__ = [
    "LOCK_CLASS",
    "PostgresLedger",
]

#: First key of every ledger advisory lock (the second is the schema's oid): "eqledger".
LOCK_CLASS = 0x65716C67
#: The lock timeout first (the row it comes from is read before the lock is asked for, so it
#: bounds the lock's own wait), then the lock: one round trip.
_LOCK = (
    "SELECT pg_advisory_xact_lock(?, COALESCE("
    "(SELECT oid::int FROM pg_namespace WHERE nspname = current_schema()), 0)) "
    "FROM (SELECT set_config('lock_timeout', ?, true)) AS bounded"
)


@cache
def _dialect(sql: str) -> str:
    # The shared SQL has no literal "?" or "%": each "?" is a parameter.
    return sql.replace("?", "%s")


class _PgTx:
    """``Tx`` over one psycopg connection inside its transaction."""

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        self._conn = conn

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        return self._conn.execute(_dialect(sql), params).fetchone()

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(_dialect(sql), params).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(_dialect(sql), params).rowcount

    def run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(_dialect(sql), rows)


def _configure(conn: psycopg.Connection[Any]) -> None:
    # Explicit, whatever the server's default: after the advisory lock, each statement
    # must see what the previous holder committed.
    conn.isolation_level = IsolationLevel.READ_COMMITTED


class PostgresLedger(BaseLedger):
    """A ledger in the PostgreSQL schema ``url`` selects, behind a connection pool of
    ``pool_size`` connections (thread-safe). ``timeout_s`` bounds waiting for a pooled
    connection: while the server is down, each operation fails after it with
    ``ledger_unavailable`` (the pool reconnects by itself once the server is back)."""

    backend = "postgresql"
    migrations = (tuple(statement.format(seq="BIGINT") for statement in SCHEMA_V1),)
    meta_exists_sql = "SELECT 1 WHERE to_regclass('meta') IS NOT NULL"

    def __init__(
        self,
        url: str,
        *,
        check_schema: bool = True,
        clock: Clock = system_clock,
        pool_size: int = 4,
        timeout_s: float = 5.0,
        lock_timeout_ms: int = 5000,
    ) -> None:
        super().__init__(show_target(url), clock)
        self._lock_timeout = f"{int(lock_timeout_ms)}ms"
        self._timeout_s = timeout_s
        # One direct connection first: its error says why (refused, unknown database, auth),
        # where a pool would only time out.
        try:
            psycopg.connect(url).close()
        except psycopg.Error as exc:
            raise _mapped(exc, self.target) from None
        self._pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            open=False,
            configure=_configure,
            check=ConnectionPool.check_connection,  # a restarted server's dead connections
            timeout=timeout_s,
            name="external-query-ledger",
        )
        self._pool.open(wait=False)
        try:
            if check_schema:
                self.check_schema()
        except BaseException:
            self._pool.close()
            raise

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout:
            raise LedgerError(
                "ledger_unavailable", f"{self.target}: no connection within {self._timeout_s}s"
            ) from None
        except psycopg.Error as exc:
            raise _mapped(exc, self.target) from None

    @contextmanager
    def _write(self) -> Iterator[Tx]:
        with self._connection() as conn, conn.transaction():
            conn.execute(_dialect(_LOCK), (LOCK_CLASS, self._lock_timeout))
            tx = _PgTx(conn)
            problem = self._unverified_head(tx)
            before = self._head_in(tx) if problem is not None else None
            yield tx
            self._anchor(tx, problem, before)

    def _stored_head_in(self, tx: Tx) -> LedgerHead | None:
        return _head_row(tx.one(_HEAD_SELECT), self.target)

    def _anchor(self, tx: Tx, problem: str | None, before: LedgerHead | None) -> None:
        """Write the head, inside the transaction that moved it (so never out of step); a
        head that did not verify when the transaction began is never replaced (the
        transaction is rolled back with ``ledger_head_mismatch``)."""
        if tx.one(self.meta_exists_sql) is None:
            return  # before the first migration: nothing to anchor yet
        head = self._head_in(tx)
        if problem is not None and head != before:
            raise self._refuse_unverified(problem)
        if head is None or head == _head_row(tx.one(_HEAD_SELECT), self.target):
            return
        tx.run(
            "INSERT INTO meta(key, value) VALUES ('head', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (head.sealed_json(),),
        )

    def stored_head(self) -> LedgerHead | None:
        with self._read() as tx:
            return _head_row(tx.one(_HEAD_SELECT), self.target)

    @contextmanager
    def _read(self) -> Iterator[Tx]:
        with self._connection() as conn, conn.transaction():
            yield _PgTx(conn)

    def integrity_check(self) -> str:
        # PostgreSQL keeps its pages and constraints consistent itself; that the server
        # answers and the schema is current is what is left to check here.
        self.check_schema()
        return "ok"


_HEAD_SELECT = "SELECT value FROM meta WHERE key = 'head'"


def _head_row(row: tuple[Any, ...] | None, target: str) -> LedgerHead | None:
    return None if row is None else LedgerHead.from_sealed_json(str(row[0]), target)


def _mapped(exc: psycopg.Error, target: str) -> LedgerError:
    text = " ".join(str(exc).split())
    if isinstance(exc, errors.LockNotAvailable | errors.QueryCanceled):
        return LedgerError("ledger_busy", f"{target}: {text}")
    if isinstance(exc, errors.UndefinedTable):
        return LedgerError(
            "ledger_needs_migration",
            f"{target}: {text}: run `external-query ledger migrate` with the same --config",
        )
    return LedgerError("ledger_unavailable", f"{target}: {text}")
