"""The research ledger: an embedded SQLite file holding contract records and the compact
sources each project has read back.

Durability: WAL, ``synchronous=FULL``, every write one ``BEGIN IMMEDIATE`` transaction
(so a killed writer leaves either the whole write or none of it) and a ``busy_timeout``
for concurrent writers. Idempotency: records are keyed by their content id (``UNIQUE``,
``INSERT … ON CONFLICT DO NOTHING``), so the same admission written twice — also by two
processes — is one row. Tamper evidence: each record stores the SHA-256 of its canonical
body and a running hash chain; ``verify()`` recomputes both and every content id.
Blockers (a wrong question, an unrelated existing source, an exhausted source budget)
are results, not exceptions.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from .admission.admit import admission_id_of, check_admission, verify_admission
from .admission.canonical import canonical_json, content_id
from .admission.chain import ChainRecord
from .admission.errors import ContractRejected, EvidenceInputError
from .admission.models import (
    Admission,
    EvidencePlan,
    EvidenceReceipt,
    LedgerCoverage,
    parse_model,
)
from .admission.plan import normalize_one_line, verify_plan
from .admission.projection import compact
from .admission.receipt import check_identity, parse_receipt, receipt_digest
from .clock import Clock, system_clock
from .digests import sha256_digest
from .errors import ExternalQueryError
from .settings import Settings

__all__ = [
    "APP_FOLDER",
    "DEFAULT_SOURCE_BUDGET",
    "LEDGER_FILE",
    "SCHEMA_VERSION",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "LedgerProject",
    "LedgerVerification",
    "default_ledger_path",
    "resolve_ledger_path",
]

DEFAULT_SOURCE_BUDGET = 50
APP_FOLDER = "external-query"
LEDGER_FILE = "ledger.sqlite3"
SCHEMA_VERSION = "1"
_GENESIS = "sha256:" + "0" * 64

RecordKind = Literal["plan", "receipt", "admission", "chain"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    body_digest TEXT NOT NULL,
    chain TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS projects (
    project TEXT PRIMARY KEY,
    question TEXT NOT NULL,
    source_budget INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS project_sources (
    project TEXT NOT NULL REFERENCES projects(project),
    source_ref TEXT NOT NULL,
    admission_id TEXT NOT NULL,
    plan_id TEXT NOT NULL,
    receipt_digest TEXT NOT NULL,
    content_digest TEXT NOT NULL,
    compact TEXT NOT NULL,
    written_at TEXT NOT NULL,
    PRIMARY KEY (project, source_ref)
);
"""


class LedgerError(ExternalQueryError):
    """The ledger file cannot be used: ``ledger_unavailable`` (open, create, read-only,
    corrupt) or ``ledger_busy`` (another writer held the lock past the timeout;
    retryable)."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")

    @property
    def retryable(self) -> bool:
        """True for ``ledger_busy``: the same write may succeed once the other writer is done."""
        return self.reason == "ledger_busy"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LedgerEntry(_Frozen):
    """A record written (or found already written) in the ledger: its kind, digest and
    sequence number; ``inserted`` is False when it was there before."""

    kind: str
    digest: str
    seq: int
    inserted: bool


class LedgerProject(_Frozen):
    """A research project: its question, source budget and how many sources it holds;
    ``created`` says whether this call started it."""

    markdown_title: ClassVar[str] = "Research project"

    project: str
    question: str
    source_budget: int
    source_count: int
    created: bool


class LedgerVerification(_Frozen):
    """The result of ``Ledger.verify``: SQLite's integrity check, and the first record whose
    content id, body hash or chain link does not match (``first_bad_seq``, ``problem``)."""

    ok: bool
    records: int
    integrity: str
    first_bad_seq: int | None = None
    problem: str | None = None


def default_ledger_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/external-query/ledger.sqlite3``, else under ``~/.local/share``."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME", "").strip()
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share"
    return root / APP_FOLDER / LEDGER_FILE


def resolve_ledger_path(
    explicit: str | Path | None = None,
    settings: Settings | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """``--ledger`` wins, then ``settings.ledger.path``, then the user's data folder."""
    if explicit is not None:
        return Path(explicit)
    if settings is not None and settings.ledger.path is not None:
        return settings.ledger.path
    return default_ledger_path(env)


def _chain(previous: str, body_digest: str) -> str:
    return sha256_digest(f"{previous}\n{body_digest}")


class Ledger:
    """One SQLite ledger file. Thread-safe (one lock around one connection).

    ``create=False`` refuses to create a missing file (read-only uses); ``clock`` stamps
    ``recorded_at`` columns, which stay outside every content id.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = True,
        busy_timeout_ms: int = 5000,
        clock: Clock = system_clock,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            mode = "rwc" if create else "rw"
            self._db = sqlite3.connect(
                f"file:{self.path}?mode={mode}",
                uri=True,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,  # explicit BEGIN IMMEDIATE; no implicit transactions
                check_same_thread=False,
            )
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError("ledger_unavailable", f"{self.path}: {exc}") from None
        try:
            self._setup(busy_timeout_ms)
        except BaseException:
            self._db.close()
            raise

    def _setup(self, busy_timeout_ms: int) -> None:
        # Switching to WAL (and the first checkpoint of a closing peer) can answer "locked"
        # without waiting on the busy handler, so the setup retries within the same budget.
        deadline = time.monotonic() + busy_timeout_ms / 1000
        while True:
            try:
                self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                if self._db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self._db.execute("PRAGMA journal_mode = WAL")
                # FULL: a committed receipt survives power loss, not only a process crash.
                self._db.execute("PRAGMA synchronous = FULL")
                self._db.execute("PRAGMA foreign_keys = ON")
                with self._write() as db:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            db.execute(statement)
                    db.execute(
                        "INSERT INTO meta(key, value) VALUES ('schema_version', ?) "
                        "ON CONFLICT(key) DO NOTHING",
                        (SCHEMA_VERSION,),
                    )
                return
            except (sqlite3.Error, LedgerError) as exc:
                error = exc if isinstance(exc, LedgerError) else _mapped(exc, self.path)
                if error.reason != "ledger_busy" or time.monotonic() >= deadline:
                    raise error from None
                time.sleep(0.02)

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed whole or rolled back whole."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise _mapped(exc, self.path) from None
            try:
                yield self._db
            except sqlite3.Error as exc:
                self._rollback()
                raise _mapped(exc, self.path) from None
            except BaseException:
                self._rollback()
                raise
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise _mapped(exc, self.path) from None

    def _rollback(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise _mapped(exc, self.path) from None

    # -- records --------------------------------------------------------------------------
    def _insert(
        self, db: sqlite3.Connection, kind: RecordKind, digest: str, body: Mapping[str, Any]
    ) -> LedgerEntry:
        found = db.execute("SELECT seq FROM records WHERE digest = ?", (digest,)).fetchone()
        if found is not None:
            return LedgerEntry(kind=kind, digest=digest, seq=found[0], inserted=False)
        text = canonical_json(body).decode("utf-8")
        body_digest = sha256_digest(text)
        last = db.execute("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1").fetchone()
        seq, previous = (last[0] + 1, last[1]) if last else (1, _GENESIS)
        cursor = db.execute(
            "INSERT INTO records(seq, kind, digest, body, body_digest, chain, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(digest) DO NOTHING",
            (seq, kind, digest, text, body_digest, _chain(previous, body_digest), self._now()),
        )
        return LedgerEntry(kind=kind, digest=digest, seq=seq, inserted=cursor.rowcount == 1)

    def _now(self) -> str:
        return self._clock().isoformat()

    def record(self, kind: RecordKind, digest: str, body: Mapping[str, Any]) -> LedgerEntry:
        """Append one record unless its ``digest`` is already there (then return that)."""
        with self._write() as db:
            return self._insert(db, kind, digest, body)

    def _lineage(
        self,
        db: sqlite3.Connection,
        plan: EvidencePlan,
        receipt: EvidenceReceipt | None,
        admission: Admission | None,
    ) -> list[LedgerEntry]:
        results = [self._insert(db, "plan", plan.plan_id, plan.model_dump(mode="json"))]
        if receipt is not None:
            results.append(self._insert(db, "receipt", receipt_digest(receipt), receipt.hashed()))
        if admission is not None:
            results.append(
                self._insert(
                    db, "admission", admission.admission_id, admission.model_dump(mode="json")
                )
            )
        return results

    def record_receipt(self, plan: EvidencePlan, receipt: EvidenceReceipt) -> list[LedgerEntry]:
        """Record a checked receipt (and its plan) as observations, in one transaction."""
        check_identity(verify_plan(plan), parse_receipt(receipt))
        with self._write() as db:
            return self._lineage(db, plan, receipt, None)

    def record_admission(
        self, plan: EvidencePlan, receipt: EvidenceReceipt, admission: Admission
    ) -> list[LedgerEntry]:
        """Record plan, receipt and admission together; a retry changes nothing."""
        check_admission(verify_plan(plan), parse_receipt(receipt), admission)
        with self._write() as db:
            return self._lineage(db, plan, receipt, admission)

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
        with self._write() as db:
            results: list[LedgerEntry] = []
            for link in record.links:
                results.extend(self._lineage(db, link.plan, link.receipt, link.admission))
            results.append(self._insert(db, "chain", content_id(hashed), hashed))
            return results

    def has_record(self, digest: str) -> bool:
        """Whether a record with content id ``digest`` is stored."""
        with self._read() as db:
            found = db.execute("SELECT 1 FROM records WHERE digest = ?", (digest,)).fetchone()
        return found is not None

    def count(self, kind: RecordKind | None = None) -> int:
        """How many records are stored (of ``kind``, when given)."""
        with self._read() as db:
            if kind is None:
                row = db.execute("SELECT COUNT(*) FROM records").fetchone()
            else:
                row = db.execute("SELECT COUNT(*) FROM records WHERE kind = ?", (kind,)).fetchone()
        return int(row[0])

    # -- projects -------------------------------------------------------------------------
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
        with self._write() as db:
            row = db.execute(
                "SELECT question, source_budget FROM projects WHERE project = ?", (name,)
            ).fetchone()
            created = row is None
            if created:
                db.execute(
                    "INSERT INTO projects(project, question, source_budget, created_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT(project) DO NOTHING",
                    (name, asked, source_budget, self._now()),
                )
                budget = source_budget
            elif row[0] != asked:
                raise ContractRejected(
                    "project_question_conflict", f"{name} already asks: {compact(row[0], 200)}"
                )
            else:
                budget = row[1]
            count = db.execute(
                "SELECT COUNT(*) FROM project_sources WHERE project = ?", (name,)
            ).fetchone()[0]
        return LedgerProject(
            project=name, question=asked, source_budget=budget, source_count=count, created=created
        )

    def project(self, name: str) -> LedgerProject | None:
        """The project called ``name``, or None when it was never started."""
        with self._read() as db:
            row = db.execute(
                "SELECT question, source_budget FROM projects WHERE project = ?", (name,)
            ).fetchone()
            if row is None:
                return None
            count = db.execute(
                "SELECT COUNT(*) FROM project_sources WHERE project = ?", (name,)
            ).fetchone()[0]
        return LedgerProject(
            project=name, question=row[0], source_budget=row[1], source_count=count, created=False
        )

    # -- readback -------------------------------------------------------------------------
    def coverage(self, project: str, plan: EvidencePlan, admission: Admission) -> LedgerCoverage:
        """What ``project`` holds for ``admission`` (read only)."""
        with self._read() as db:
            return self._coverage(db, project, plan, admission, executed=False)

    def _coverage(
        self,
        db: sqlite3.Connection,
        project: str,
        plan: EvidencePlan,
        admission: Admission,
        *,
        executed: bool,
        written: Sequence[str] = (),
        blockers: Sequence[str] = (),
    ) -> LedgerCoverage:
        row = db.execute("SELECT question FROM projects WHERE project = ?", (project,)).fetchone()
        extra = () if row is not None or executed else ("project_not_started",)
        present: list[str] = []
        for item in admission.admitted_sources:
            found = db.execute(
                "SELECT admission_id, content_digest FROM project_sources "
                "WHERE project = ? AND source_ref = ?",
                (project, item.source_ref),
            ).fetchone()
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
        with self._write() as db:
            self._lineage(db, checked_plan, checked, admission)
            row = db.execute(
                "SELECT question, source_budget FROM projects WHERE project = ?", (project,)
            ).fetchone()
            if row is None:
                blockers.append("project_not_started")
            elif row[0] != checked_plan.objective:
                blockers.append("question_mismatch")
            else:
                budget = int(row[1])
                for item in admission.admitted_sources:
                    blocker = self._write_source(
                        db, project, budget, checked_plan, checked, admission, item.source_ref
                    )
                    if blocker == "written":
                        written.append(item.source_ref)
                    elif blocker is not None:
                        blockers.append(blocker)
            return self._coverage(
                db,
                project,
                checked_plan,
                admission,
                executed=True,
                written=written,
                blockers=blockers,
            )

    def _write_source(
        self,
        db: sqlite3.Connection,
        project: str,
        budget: int,
        plan: EvidencePlan,
        receipt: EvidenceReceipt,
        admission: Admission,
        ref: str,
    ) -> str | None:
        source = receipt.source(ref)
        found = db.execute(
            "SELECT admission_id, content_digest FROM project_sources "
            "WHERE project = ? AND source_ref = ?",
            (project, ref),
        ).fetchone()
        if found is not None:
            if found == (admission.admission_id, source.content_digest):
                return None
            return f"unrelated_existing_source:{ref}"
        used = db.execute(
            "SELECT COUNT(*) FROM project_sources WHERE project = ?", (project,)
        ).fetchone()[0]
        if used >= budget:
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
        db.execute(
            "INSERT INTO project_sources(project, source_ref, admission_id, plan_id, "
            "receipt_digest, content_digest, compact, written_at) "
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
        with self._read() as db:
            rows = db.execute(
                "SELECT source_ref, content_digest FROM project_sources WHERE admission_id = ?",
                (admission.admission_id,),
            ).fetchall()
        return [(str(ref), str(digest)) for ref, digest in rows]

    # -- checks ---------------------------------------------------------------------------
    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` answer (``ok`` when the file is sound)."""
        with self._read() as db:
            return str(db.execute("PRAGMA integrity_check").fetchone()[0])

    def verify(self) -> LedgerVerification:
        """Recompute every body digest, the hash chain, seq contiguity and content ids."""
        integrity = self.integrity_check()
        with self._read() as db:
            rows = db.execute(
                "SELECT seq, kind, digest, body, body_digest, chain FROM records ORDER BY seq"
            ).fetchall()
        previous = _GENESIS
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
        return LedgerVerification(ok=integrity == "ok", records=len(rows), integrity=integrity)


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


def _mapped(exc: sqlite3.Error, path: Path) -> LedgerError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return LedgerError("ledger_busy", f"{path}: {text}")
    return LedgerError("ledger_unavailable", f"{path}: {text}")
