"""The ledger's rules, written once over a small transaction interface: records, ids, the
hash chain, idempotency, projects, readback, verification, migrations and copying.

A backend (``sqlite.py``, ``postgres.py``) supplies only storage: a write transaction that
is committed whole or rolled back whole and that no other writer of the same ledger runs
beside (so reading the last seq and appending the next one cannot interleave), a read
transaction, its migrations, and its own integrity check. SQL here is the dialect both
databases share, with ``?`` placeholders.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Literal, Protocol, Self

from .._clock import Clock
from .._digests import sha256_digest
from ..admission._admit import admission_id_of, check_admission, verify_admission
from ..admission._canonical import canonical_json, content_id
from ..admission._chain import ChainRecord
from ..admission._models import (
    Admission,
    EvidencePlan,
    EvidenceReceipt,
    LedgerCoverage,
    parse_model,
)
from ..admission._plan import normalize_one_line, verify_plan
from ..admission._projection import compact
from ..admission._receipt import check_identity, parse_receipt, receipt_digest
from ..errors import ContractRejected, EvidenceInputError
from ._models import (
    Backend,
    LedgerCopy,
    LedgerEntry,
    LedgerError,
    LedgerHead,
    LedgerMigration,
    LedgerProject,
    LedgerRun,
    LedgerRunRecord,
    LedgerVerification,
    UnsoundLedger,
)

__all__ = [
    "COPY_BATCH",
    "DEFAULT_SOURCE_BUDGET",
    "GENESIS",
    "SCHEMA_V1",
    "SCHEMA_VERSION",
    "BaseLedger",
    "RecordKind",
    "Tx",
    "copy_ledger",
]

DEFAULT_SOURCE_BUDGET = 50
#: The schema this program reads and writes; ``migrate`` brings a ledger up to it.
SCHEMA_VERSION = 1
GENESIS = "sha256:" + "0" * 64
COPY_BATCH = 500

RecordKind = Literal["plan", "receipt", "admission", "chain"]

#: Version 1: what both backends have stored since the ledger exists. ``IF NOT EXISTS``:
#: a ledger written before versions were counted already has these tables.
SCHEMA_V1 = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS records (
        seq {seq} PRIMARY KEY,
        kind TEXT NOT NULL,
        digest TEXT NOT NULL UNIQUE,
        body TEXT NOT NULL,
        body_digest TEXT NOT NULL,
        chain TEXT NOT NULL,
        recorded_at TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS projects (
        project TEXT PRIMARY KEY,
        question TEXT NOT NULL,
        source_budget INTEGER NOT NULL,
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS project_sources (
        project TEXT NOT NULL REFERENCES projects(project),
        source_ref TEXT NOT NULL,
        admission_id TEXT NOT NULL,
        plan_id TEXT NOT NULL,
        receipt_digest TEXT NOT NULL,
        content_digest TEXT NOT NULL,
        compact TEXT NOT NULL,
        written_at TEXT NOT NULL,
        PRIMARY KEY (project, source_ref)
    )""",
)

_RECORD_COLUMNS = "seq, kind, digest, body, body_digest, chain, recorded_at"
_PROJECT_COLUMNS = "project, question, source_budget, created_at"
_SOURCE_COLUMNS = (
    "project, source_ref, admission_id, plan_id, receipt_digest, content_digest, compact, "
    "written_at"
)


class Tx(Protocol):
    """One open transaction (or read) of a backend; ``?`` marks a parameter."""

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row
        of ``sql`` with
        ``params``, or
        None."""
        ...

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of
        ``sql`` with
        ``params``."""
        ...

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute; the number of rows it changed."""
        ...

    def run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run ``sql`` once per row
        of ``rows``."""
        ...


def _chain(previous: str, body_digest: str) -> str:
    return sha256_digest(f"{previous}\n{body_digest}")


class BaseLedger(ABC):
    """Every ledger operation, over a backend's transactions. ``clock`` stamps the
    ``recorded_at``/``created_at``/``written_at`` columns, which stay outside every id."""

    backend: ClassVar[Backend]
    #: Statements taking a ledger from version ``n`` to ``n + 1`` at index ``n``.
    migrations: ClassVar[tuple[tuple[str, ...], ...]]
    #: One row when the ``meta`` table exists, none before the first migration.
    meta_exists_sql: ClassVar[str]

    def __init__(self, target: str, clock: Clock) -> None:
        #: The ledger as shown to people: a path, or a URL without its password.
        self.target = target
        self._clock = clock

    # -- what a backend supplies ----------------------------------------------------------
    @abstractmethod
    def _write(self) -> AbstractContextManager[Tx]:
        """One transaction, committed whole or rolled back whole, that no other writer of
        this ledger runs beside."""

    @abstractmethod
    def _read(self) -> AbstractContextManager[Tx]: ...

    @abstractmethod
    def close(self) -> None:
        """Close the connection (or pool); idempotent."""
        ...

    @abstractmethod
    def integrity_check(self) -> str:
        """The storage's own check: ``ok`` or what it found."""

    @abstractmethod
    def stored_head(self) -> LedgerHead | None:
        """The head kept in the second place (None before the first anchored commit);
        ``LedgerError('ledger_head_mismatch')`` when it is there but does not read back."""

    # -- the head, written beside the chain on every commit --------------------------------
    def _head_in(self, tx: Tx) -> LedgerHead | None:
        """The chain's end as ``tx`` sees it (None for an empty ledger)."""
        last = tx.one("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1")
        if last is None:
            return None
        # Seq has no gap and starts at 1 (``_insert``), so the last seq is the count.
        return LedgerHead(seq=int(last[0]), chain=str(last[1]), records=int(last[0]))

    def _stored_head_in(self, tx: Tx) -> LedgerHead | None:
        """The stored head as a write transaction sees it (``stored_head`` by default; a
        backend keeping it in the database reads it through ``tx``)."""
        return self.stored_head()

    def _unverified_head(self, tx: Tx) -> str | None:
        """Why the head kept beside the chain cannot be verified against the chain ``tx``
        sees (None when it can, or before the first migration): it does not read back; the
        chain holds records and there is no head; or the chain does not reach it. A writer
        never replaces such a head: that would erase the evidence ``verify`` reports."""
        if tx.one(self.meta_exists_sql) is None:
            return None
        try:
            head = self._stored_head_in(tx)
        except LedgerError as exc:
            return exc.detail
        last = self._head_in(tx)
        if head is None:
            return None if last is None else f"{last.seq} records and no head"
        row = tx.one("SELECT chain FROM records WHERE seq = ?", (head.seq,))
        if row is None or str(row[0]) != head.chain:
            return f"the chain no longer reaches its head (seq {head.seq})"
        return None

    def _refuse_unverified(self, problem: str) -> LedgerError:
        return LedgerError(
            "ledger_head_mismatch",
            f"{self.target}: {problem}: nothing is written over a head that does not verify "
            "(see `external-query ledger verify`)",
        )

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now(self) -> str:
        return self._clock().isoformat()

    # -- schema ---------------------------------------------------------------------------
    def _schema_version(self, tx: Tx) -> int:
        if tx.one(self.meta_exists_sql) is None:
            return 0
        row = tx.one("SELECT value FROM meta WHERE key = 'schema_version'")
        return int(row[0]) if row is not None else 0

    def _too_new(self, version: int) -> LedgerError:
        return LedgerError(
            "ledger_unavailable",
            f"{self.target} has ledger schema {version}, newer than this program's "
            f"{SCHEMA_VERSION}: upgrade external-query",
        )

    def schema_version(self) -> int:
        """The stored schema version (0: none yet)."""
        with self._read() as tx:
            return self._schema_version(tx)

    def check_schema(self) -> None:
        """Refuse a ledger whose schema is missing, older or newer than this program's."""
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise self._too_new(version)
        if version < SCHEMA_VERSION:
            found = "has no ledger schema" if version == 0 else f"has ledger schema {version}"
            raise LedgerError(
                "ledger_needs_migration",
                f"{self.target} {found}; this program needs {SCHEMA_VERSION}: run "
                "`external-query ledger migrate` with the same --config or --ledger",
            )

    def migrate(self) -> LedgerMigration:
        """Apply every missing migration in one write transaction (a concurrent
        ``migrate`` waits, then finds nothing left to do)."""
        with self._write() as tx:
            before = self._schema_version(tx)
            if before > SCHEMA_VERSION:
                raise self._too_new(before)
            applied = tuple(range(before + 1, SCHEMA_VERSION + 1))
            for version in applied:
                for statement in self.migrations[version - 1]:
                    tx.run(statement)
                tx.run(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(version),),
                )
        return LedgerMigration(
            backend=self.backend,
            ledger=self.target,
            from_version=before,
            to_version=SCHEMA_VERSION,
            applied=applied,
        )

    # -- records --------------------------------------------------------------------------
    def _insert(
        self, tx: Tx, kind: RecordKind, digest: str, body: Mapping[str, Any]
    ) -> LedgerEntry:
        found = tx.one("SELECT seq FROM records WHERE digest = ?", (digest,))
        if found is not None:
            return LedgerEntry(kind=kind, digest=digest, seq=found[0], inserted=False)
        text = canonical_json(body).decode("utf-8")
        body_digest = sha256_digest(text)
        # The write transaction keeps every other writer out: the next seq is last + 1,
        # with no gap and no second record at the same seq.
        last = tx.one("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1")
        seq, previous = (int(last[0]) + 1, str(last[1])) if last else (1, GENESIS)
        inserted = tx.run(
            f"INSERT INTO records({_RECORD_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(digest) DO NOTHING",
            (seq, kind, digest, text, body_digest, _chain(previous, body_digest), self._now()),
        )
        return LedgerEntry(kind=kind, digest=digest, seq=seq, inserted=inserted == 1)

    def record(self, kind: RecordKind, digest: str, body: Mapping[str, Any]) -> LedgerEntry:
        """Append one record unless its ``digest`` is already there (then return that)."""
        with self._write() as tx:
            return self._insert(tx, kind, digest, body)

    def _lineage(
        self,
        tx: Tx,
        plan: EvidencePlan,
        receipt: EvidenceReceipt | None,
        admission: Admission | None,
    ) -> list[LedgerEntry]:
        results = [self._insert(tx, "plan", plan.plan_id, plan.model_dump(mode="json"))]
        if receipt is not None:
            results.append(self._insert(tx, "receipt", receipt_digest(receipt), receipt.hashed()))
        if admission is not None:
            results.append(
                self._insert(
                    tx, "admission", admission.admission_id, admission.model_dump(mode="json")
                )
            )
        return results

    def record_receipt(self, plan: EvidencePlan, receipt: EvidenceReceipt) -> list[LedgerEntry]:
        """Record a checked receipt (and its plan) as observations, in one transaction."""
        check_identity(verify_plan(plan), parse_receipt(receipt))
        with self._write() as tx:
            return self._lineage(tx, plan, receipt, None)

    def record_admission(
        self, plan: EvidencePlan, receipt: EvidenceReceipt, admission: Admission
    ) -> list[LedgerEntry]:
        """Record plan, receipt and admission together; a retry changes nothing."""
        check_admission(verify_plan(plan), parse_receipt(receipt), admission)
        with self._write() as tx:
            return self._lineage(tx, plan, receipt, admission)

    def persist_chain(self, record: ChainRecord) -> list[LedgerEntry]:
        """Every plan, receipt and admission of one answer plus the chain record that
        ties them together, in one transaction (idempotent)."""
        hashed = {
            "schema_version": record.schema_version,
            "request_id": record.request.request_id,
            "plan_ids": list(record.plan_ids),
            "receipt_digests": list(record.receipt_digests),
            "admission_ids": list(record.admission_ids),
            "downstream_source_refs": list(record.downstream_source_refs),
        }
        with self._write() as tx:
            results: list[LedgerEntry] = []
            for link in record.links:
                results.extend(self._lineage(tx, link.plan, link.receipt, link.admission))
            results.append(self._insert(tx, "chain", content_id(hashed), hashed))
            return results

    def has_record(self, digest: str) -> bool:
        """True when a record with ``digest`` is stored."""
        with self._read() as tx:
            return tx.one("SELECT 1 FROM records WHERE digest = ?", (digest,)) is not None

    def run_of(self, plan_id: str) -> LedgerRun | None:
        """The plan ``plan_id`` as stored and every answer run (``chain`` record) that
        bound it, oldest first; None when the ledger does not hold the plan."""
        with self._read() as tx:
            plan = tx.one(
                "SELECT seq, body, recorded_at FROM records WHERE kind = 'plan' AND digest = ?",
                (plan_id,),
            )
            if plan is None:
                return None
            # A chain record's body lists its plan ids as JSON strings: the quoted id is a
            # literal that no LIKE wildcard can occur in (hex digits and a colon).
            rows = tx.all(
                "SELECT digest, seq, body, recorded_at FROM records "
                "WHERE kind = 'chain' AND body LIKE ? ORDER BY seq",
                (f'%"{plan_id}"%',),
            )
            runs = [self._run_record(tx, row) for row in rows]
        body = json.loads(plan[1])
        return LedgerRun(
            plan_id=plan_id,
            seq=int(plan[0]),
            recorded_at=str(plan[2]),
            provider_id=str(body["selected_provider"]["provider_id"]),
            objective=str(body["request"]["objective"]),
            runs=tuple(run for run in runs if plan_id in run.plan_ids),
        )

    def _run_record(self, tx: Tx, row: tuple[Any, ...]) -> LedgerRunRecord:
        body = json.loads(row[2])

        def held(digests: Sequence[str]) -> int:
            return sum(
                tx.one("SELECT 1 FROM records WHERE digest = ?", (digest,)) is not None
                for digest in digests
            )

        return LedgerRunRecord(
            digest=str(row[0]),
            seq=int(row[1]),
            recorded_at=str(row[3]),
            request_id=str(body["request_id"]),
            plan_ids=tuple(body["plan_ids"]),
            receipt_digests=tuple(body["receipt_digests"]),
            admission_ids=tuple(body["admission_ids"]),
            receipts_held=held(body["receipt_digests"]),
            admissions_held=held(body["admission_ids"]),
        )

    def count(self, kind: RecordKind | None = None) -> int:
        """How many records the ledger holds."""
        with self._read() as tx:
            if kind is None:
                row = tx.one("SELECT COUNT(*) FROM records")
            else:
                row = tx.one("SELECT COUNT(*) FROM records WHERE kind = ?", (kind,))
        return int(row[0]) if row is not None else 0

    # -- projects -------------------------------------------------------------------------
    def _source_count(self, tx: Tx, project: str) -> int:
        row = tx.one("SELECT COUNT(*) FROM project_sources WHERE project = ?", (project,))
        return int(row[0]) if row is not None else 0

    def start_project(
        self, project: str, question: str, *, source_budget: int = DEFAULT_SOURCE_BUDGET
    ) -> LedgerProject:
        """Start ``project`` with ``question``; starting it again with the same question
        is a no-op, with another question ``ContractRejected('project_question_conflict')``."""
        name = project.strip()
        asked = normalize_one_line(question)
        if not name or not asked:
            raise ContractRejected("empty_project", "a project needs a name and a question")
        if source_budget < 1:
            raise ContractRejected("invalid_source_budget", "the source budget is at least 1")
        with self._write() as tx:
            row = tx.one("SELECT question, source_budget FROM projects WHERE project = ?", (name,))
            created = row is None
            if row is None:
                tx.run(
                    f"INSERT INTO projects({_PROJECT_COLUMNS}) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(project) DO NOTHING",
                    (name, asked, source_budget, self._now()),
                )
                budget = source_budget
            elif row[0] != asked:
                raise ContractRejected(
                    "project_question_conflict", f"{name} already asks: {compact(row[0], 200)}"
                )
            else:
                budget = int(row[1])
            count = self._source_count(tx, name)
        return LedgerProject(
            project=name, question=asked, source_budget=budget, source_count=count, created=created
        )

    def project(self, name: str) -> LedgerProject | None:
        """The project named ``project``, or None."""
        with self._read() as tx:
            row = tx.one("SELECT question, source_budget FROM projects WHERE project = ?", (name,))
            if row is None:
                return None
            count = self._source_count(tx, name)
        return LedgerProject(
            project=name,
            question=row[0],
            source_budget=int(row[1]),
            source_count=count,
            created=False,
        )

    # -- readback -------------------------------------------------------------------------
    def coverage(self, project: str, plan: EvidencePlan, admission: Admission) -> LedgerCoverage:
        """What ``project`` holds for ``admission`` (read only)."""
        with self._read() as tx:
            return self._coverage(tx, project, plan, admission, executed=False)

    def _coverage(
        self,
        tx: Tx,
        project: str,
        plan: EvidencePlan,
        admission: Admission,
        *,
        executed: bool,
        written: Sequence[str] = (),
        blockers: Sequence[str] = (),
    ) -> LedgerCoverage:
        row = tx.one("SELECT question FROM projects WHERE project = ?", (project,))
        extra = () if row is not None or executed else ("project_not_started",)
        present: list[str] = []
        for item in admission.admitted_sources:
            found = tx.one(
                "SELECT admission_id, content_digest FROM project_sources "
                "WHERE project = ? AND source_ref = ?",
                (project, item.source_ref),
            )
            if found == (admission.admission_id, item.content_digest):
                present.append(item.source_ref)
        missing = tuple(ref for ref in admission.admitted_source_refs if ref not in present)
        state: Literal["complete", "partial_retained", "empty"]
        if present and not missing:
            state = "complete"
        elif present:
            state = "partial_retained"
        else:
            state = "empty"
        return LedgerCoverage(
            project=project,
            question_matches=row is not None and row[0] == plan.objective,
            executed=executed,
            written_source_refs=tuple(written),
            present_source_refs=tuple(present),
            missing_source_refs=missing,
            write_blockers=(*blockers, *extra),
            state=state,
        )

    def write_readback(
        self,
        project: str,
        plan: EvidencePlan,
        receipt: EvidenceReceipt,
        admission: Admission,
    ) -> LedgerCoverage:
        """Write the admitted compact sources into ``project`` (``readback --execute``).

        Only when the project's question equals the plan objective. Sources already there
        with the same lineage count as read back (retries are idempotent); a source ref
        there with another lineage (``unrelated_existing_source``) or beyond the budget
        (``source_budget_exhausted``) is a blocker for that source, and the other sources
        are still written, so a partial projection is retained.
        """
        checked_plan = verify_plan(plan)
        checked = parse_receipt(receipt)
        check_admission(checked_plan, checked, admission)
        blockers: list[str] = []
        written: list[str] = []
        with self._write() as tx:
            self._lineage(tx, checked_plan, checked, admission)
            row = tx.one(
                "SELECT question, source_budget FROM projects WHERE project = ?", (project,)
            )
            if row is None:
                blockers.append("project_not_started")
            elif row[0] != checked_plan.objective:
                blockers.append("question_mismatch")
            else:
                budget = int(row[1])
                for item in admission.admitted_sources:
                    blocker = self._write_source(
                        tx, project, budget, checked_plan, checked, admission, item.source_ref
                    )
                    if blocker == "written":
                        written.append(item.source_ref)
                    elif blocker is not None:
                        blockers.append(blocker)
            return self._coverage(
                tx,
                project,
                checked_plan,
                admission,
                executed=True,
                written=written,
                blockers=blockers,
            )

    def _write_source(
        self,
        tx: Tx,
        project: str,
        budget: int,
        plan: EvidencePlan,
        receipt: EvidenceReceipt,
        admission: Admission,
        ref: str,
    ) -> str | None:
        source = receipt.source(ref)
        found = tx.one(
            "SELECT admission_id, content_digest FROM project_sources "
            "WHERE project = ? AND source_ref = ?",
            (project, ref),
        )
        if found is not None:
            if found == (admission.admission_id, source.content_digest):
                return None
            return f"unrelated_existing_source:{ref}"
        if self._source_count(tx, project) >= budget:
            return f"source_budget_exhausted:{ref}"
        view = {
            "source_ref": ref,
            "url": source.url,
            "source_family": compact(source.source_family, 120),
            "basis": compact(source.basis, 120),
            "finding": compact(source.finding),
            "limitation": compact(source.limitation),
            "publication_date": source.publication_date,
            "accessed_at": source.accessed_at,
            "content_digest": source.content_digest,
        }
        tx.run(
            f"INSERT INTO project_sources({_SOURCE_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(project, source_ref) DO NOTHING",
            (
                project,
                ref,
                admission.admission_id,
                plan.plan_id,
                admission.receipt_digest,
                source.content_digest,
                canonical_json(view).decode("utf-8"),
                self._now(),
            ),
        )
        return "written"

    def downstream_for(self, admission: Admission) -> list[tuple[str, str]]:
        """``(source_ref, content_digest)`` of every project source with this lineage."""
        with self._read() as tx:
            rows = tx.all(
                "SELECT source_ref, content_digest FROM project_sources WHERE admission_id = ?",
                (admission.admission_id,),
            )
        return [(str(ref), str(digest)) for ref, digest in rows]

    # -- checks ---------------------------------------------------------------------------
    def verify(self, expect_head: LedgerHead | None = None) -> LedgerVerification:
        """Recompute every body digest, the hash chain, seq contiguity and content ids, then
        check the chain against the head kept beside it and against ``expect_head`` (one
        the caller kept elsewhere): a chain that no longer reaches a head, or reaches it
        with another chain value, is ``head_mismatch`` (records cut off the end, or the
        history rewritten); so are records with no head at all (``first_bad_seq`` 1). Records
        after the kept head (a writer that stopped between its commit and the head write) are
        not a mismatch."""
        integrity = self.integrity_check()
        with self._read() as tx:
            rows = tx.all(
                "SELECT seq, kind, digest, body, body_digest, chain FROM records ORDER BY seq"
            )
        chains: list[str] = []
        previous = GENESIS
        for expected_seq, (seq, kind, digest, body, body_digest, chain) in enumerate(rows, 1):
            problem = _check_row(expected_seq, seq, kind, digest, body, body_digest)
            if problem is None and chain != _chain(previous, body_digest):
                problem = "chain_broken"
            if problem is not None:
                return LedgerVerification(
                    ok=False,
                    records=len(rows),
                    integrity=integrity,
                    first_bad_seq=seq,
                    problem=problem,
                )
            previous = chain
            chains.append(chain)
        try:
            stored = self.stored_head()
        except LedgerError:
            stored, unreadable = None, True
        else:
            unreadable = False
        missed = [head for head in (stored, expect_head) if head and not _reaches(chains, head)]
        # Records and no head: the head was deleted (with or without the newest records);
        # a ledger's first commit writes one, so nothing sound looks like this.
        headless = stored is None and bool(rows)
        if unreadable or missed or headless:
            return LedgerVerification(
                ok=False,
                records=len(rows),
                integrity=integrity,
                first_bad_seq=min(len(rows) + 1, *(head.seq for head in missed))
                if missed
                else 1
                if headless
                else None,
                problem="head_mismatch",
                last_chain=previous,
                head_seq=stored.seq if stored else None,
            )
        return LedgerVerification(
            ok=integrity == "ok",
            records=len(rows),
            integrity=integrity,
            last_chain=previous,
            head_seq=stored.seq if stored else None,
        )

    # -- copying --------------------------------------------------------------------------
    def _records_after(self, seq: int) -> Iterator[list[tuple[Any, ...]]]:
        """Stored records past ``seq``, in seq order, a batch per read."""
        while True:
            with self._read() as tx:
                batch = tx.all(
                    f"SELECT {_RECORD_COLUMNS} FROM records WHERE seq > ? ORDER BY seq LIMIT ?",
                    (seq, COPY_BATCH),
                )
            if not batch:
                return
            yield batch
            seq = int(batch[-1][0])

    def _projects(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        with self._read() as tx:
            projects = tx.all(f"SELECT {_PROJECT_COLUMNS} FROM projects ORDER BY project")
            sources = tx.all(
                f"SELECT {_SOURCE_COLUMNS} FROM project_sources ORDER BY project, source_ref"
            )
        return projects, sources


def copy_ledger(source: BaseLedger, target: BaseLedger) -> LedgerCopy:
    """Copy every record (same seq, body, digests, chain and stamps), project and project
    source of a sound ``source`` into ``target``, in one target transaction, then verify.

    The target must be migrated and hold either nothing or a prefix of the source's chain
    (an earlier copy): then only the rest is appended, so copying again is a no-op.
    Projects and sources already there must be the same rows. An unsound source is
    refused before anything is written (``LedgerVerification`` in the ``LedgerError``).
    """
    checked = source.verify()
    if not checked.ok:
        raise UnsoundLedger(source.target, checked)
    projects, sources = source._projects()
    copied = 0
    with target._write() as tx:
        last = tx.one("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1")
        start = int(last[0]) if last is not None else 0
        if last is not None:
            with source._read() as read:
                mine = read.one("SELECT chain FROM records WHERE seq = ?", (start,))
            if mine is None or mine[0] != last[1]:
                raise LedgerError(
                    "ledger_copy_conflict",
                    f"{target.target} holds {start} records that are not "
                    f"{source.target}'s first {start}",
                )
        for batch in source._records_after(start):
            tx.run_many(
                f"INSERT INTO records({_RECORD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", batch
            )
            copied += len(batch)
        _merge(tx, "projects", _PROJECT_COLUMNS, ("project",), projects, target.target)
        _merge(
            tx,
            "project_sources",
            _SOURCE_COLUMNS,
            ("project", "source_ref"),
            sources,
            target.target,
        )
    verification = target.verify()
    if not verification.ok:
        raise UnsoundLedger(target.target, verification)
    if verification.last_chain != checked.last_chain:
        raise LedgerError(
            "ledger_copy_conflict",
            f"{target.target} ends on another chain than {source.target} after the copy "
            "(was it written to meanwhile?)",
        )
    return LedgerCopy(
        source=source.target,
        target=target.target,
        records_copied=copied,
        records=verification.records,
        projects=len(projects),
        project_sources=len(sources),
        verification=verification,
    )


def _reaches(chains: Sequence[str], head: LedgerHead) -> bool:
    """Does the chain still hold ``head``: a record at its seq with its chain value?"""
    return head.seq <= len(chains) and chains[head.seq - 1] == head.chain


def _merge(
    tx: Tx,
    table: str,
    columns: str,
    key: tuple[str, ...],
    rows: Sequence[tuple[Any, ...]],
    target: str,
) -> None:
    """Insert ``rows`` that are missing; one already there must be the same row (its
    time stamps aside)."""
    names = [name.strip() for name in columns.split(",")]
    marks = ", ".join("?" for _ in names)
    where = " AND ".join(f"{name} = ?" for name in key)
    for row in rows:
        keys = tuple(row[names.index(name)] for name in key)
        found = tx.one(f"SELECT {columns} FROM {table} WHERE {where}", keys)
        if found is None:
            tx.run(f"INSERT INTO {table}({columns}) VALUES ({marks})", row)
        elif tuple(found[:-1]) != tuple(row[:-1]):  # the last column is a time stamp
            raise LedgerError(
                "ledger_copy_conflict",
                f"{target} already has {table} {'/'.join(map(str, keys))} with other content",
            )


def _check_row(
    expected_seq: int, seq: int, kind: str, digest: str, body: str, body_digest: str
) -> str | None:
    if seq != expected_seq:
        return "seq_gap"
    if sha256_digest(body) != body_digest:
        return "body_digest_mismatch"
    try:
        data = json.loads(body)
        if kind == "plan":
            actual = verify_plan(data).plan_id
        elif kind == "receipt":
            actual = receipt_digest(parse_receipt(data))
        elif kind == "admission":
            actual = admission_id_of(verify_admission(parse_model(Admission, data, "invalid")))
        else:
            actual = content_id(data)
    except (ValueError, ContractRejected, EvidenceInputError):
        # A body that no longer parses, validates or hashes (a float, a lone surrogate).
        return "unreadable_body"
    return None if actual == digest else "content_id_mismatch"
