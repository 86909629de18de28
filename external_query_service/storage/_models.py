"""What a ledger answers with, whatever stores it: results, reports and its one error."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import ClassVar, Literal
from urllib.parse import SplitResult, urlsplit

from .._digests import sha256_digest
from .._frozen import Frozen
from ..errors import LedgerError, UnsoundLedger

__all__ = [
    "Backend",
    "LedgerCopy",
    "LedgerEntry",
    "LedgerError",
    "LedgerHead",
    "LedgerMigration",
    "LedgerProject",
    "LedgerRun",
    "LedgerRunRecord",
    "LedgerTarget",
    "LedgerVerification",
    "UnsoundLedger",
    "show_target",
]

#: A SQLite file, or a ``postgresql://`` URL.
LedgerTarget = Path | str


def show_target(target: LedgerTarget) -> str:
    """``target`` fit to print: a URL loses its password (in the authority or as a
    ``password=`` parameter)."""
    if isinstance(target, Path):
        return str(target)
    parts = urlsplit(target)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hosts = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{hosts}"
    query = re.sub(r"(^|&)password=[^&]*", r"\1password=***", parts.query)
    return SplitResult(parts.scheme, netloc, parts.path, query, parts.fragment).geturl()


Backend = Literal["sqlite", "postgresql"]


class LedgerEntry(Frozen):
    """One stored record: its seq, kind, digest, and whether this call wrote it."""

    kind: str
    digest: str
    seq: int
    inserted: bool


class LedgerProject(Frozen):
    """A readback project: its question, source budget and creation time."""

    markdown_title: ClassVar[str] = "Research project"

    project: str
    question: str
    source_budget: int
    source_count: int
    created: bool


class LedgerHead(Frozen):
    """The ledger's end as written to a second place on every commit: the last seq, its
    chain value and the record count (equal to the seq: seq has no gap). ``digest`` seals
    the three, so a head edited on its own does not read back as a head."""

    seq: int
    chain: str
    records: int

    @property
    def digest(self) -> str:
        """The head's own digest over its three fields."""
        return sha256_digest(f"ledger-head\n{self.seq}\n{self.chain}\n{self.records}")

    def sealed_json(self) -> str:
        """The head as stored: its fields and its digest, as one JSON object."""
        fields = {"seq": self.seq, "chain": self.chain, "records": self.records}
        return json.dumps({**fields, "digest": self.digest}, sort_keys=True)

    @classmethod
    def from_sealed_json(cls, text: str, where: str) -> LedgerHead:
        """A head as ``sealed_json`` wrote it; ``LedgerError('ledger_head_mismatch')`` when
        ``text`` is not one or its digest does not seal its fields."""
        try:
            fields = json.loads(text)
            head = cls(seq=fields["seq"], chain=fields["chain"], records=fields["records"])
            sealed = fields["digest"] == head.digest
        except (ValueError, KeyError, TypeError):
            sealed = False
        if not sealed:
            raise LedgerError("ledger_head_mismatch", f"{where}: not a sealed ledger head")
        return head

    def spelled(self) -> str:
        """``SEQ:DIGEST``, the form ``ledger verify --expect-head`` takes."""
        return f"{self.seq}:{self.chain}"

    @classmethod
    def parse(cls, text: str) -> LedgerHead:
        """``SEQ:DIGEST`` (``DIGEST`` with or without its ``sha256:`` prefix) as a head;
        ``LedgerError('ledger_head_invalid')`` for anything else."""
        seq, _, chain = text.strip().partition(":")
        chain = chain if chain.startswith("sha256:") else f"sha256:{chain}"
        hex_part = chain.removeprefix("sha256:")
        if not seq.isdigit() or int(seq) < 1 or len(hex_part) != 64 or not _is_hex(hex_part):
            raise LedgerError(
                "ledger_head_invalid", f"expected SEQ:sha256:<64 hex digits>, got {text[:100]!r}"
            )
        return cls(seq=int(seq), chain=chain, records=int(seq))


def _is_hex(text: str) -> bool:
    return all(char in "0123456789abcdef" for char in text)


class LedgerVerification(Frozen):
    """``verify()``: ``ok`` when the storage's own check passed (``integrity``: SQLite's
    ``PRAGMA integrity_check``; PostgreSQL keeps its own consistency and reports ``ok``) and
    every record's body digest, content id, seq and chain link recompute."""

    markdown_title: ClassVar[str] = "Ledger verification"

    ok: bool
    records: int
    integrity: str
    first_bad_seq: int | None = None
    problem: str | None = None
    #: The chain value of the last record (the genesis value for an empty ledger): two
    #: ledgers whose last chains match hold the same records in the same order.
    last_chain: str | None = None
    #: The seq of the head kept beside the ledger that the chain was checked against
    #: (None: no head kept yet). ``records:last_chain`` is the head to keep elsewhere.
    head_seq: int | None = None


class LedgerMigration(Frozen):
    """What ``migrate`` did: the schema version before and after."""

    markdown_title: ClassVar[str] = "Ledger migration"

    backend: Backend
    ledger: str
    from_version: int
    to_version: int
    applied: tuple[int, ...]


class LedgerCopy(Frozen):
    """What ``copy`` did: records copied, and the chain value both ledgers end on."""

    markdown_title: ClassVar[str] = "Ledger copy"

    source: str
    target: str
    records_copied: int
    records: int
    projects: int
    project_sources: int
    verification: LedgerVerification


class LedgerRunRecord(Frozen):
    """One answer run that bound a plan (a ``chain`` record): its ids, where and when it
    was stored, and which of its receipts and admissions the ledger holds."""

    digest: str
    seq: int
    recorded_at: str
    request_id: str
    plan_ids: tuple[str, ...]
    receipt_digests: tuple[str, ...]
    admission_ids: tuple[str, ...]
    receipts_held: int
    admissions_held: int


class LedgerRun(Frozen):
    """``ledger show PLAN_ID``: the plan as stored (seq, time, provider, objective) and
    every answer run that bound it."""

    markdown_title: ClassVar[str] = "Ledger run"

    plan_id: str
    seq: int
    recorded_at: str
    provider_id: str
    objective: str
    runs: tuple[LedgerRunRecord, ...]
