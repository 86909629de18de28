"""The SQLite research ledger: durability settings, idempotency across processes, kill
safety, tamper evidence, and blockers reported as results."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from external_query_service.admission import (
    ContractRejected,
    build_plan,
    build_request,
    content_id,
    decide,
    parse_inventory,
    parse_receipt,
    verify_plan,
)
from external_query_service.admission.models import Admission, EvidencePlan, EvidenceReceipt
from external_query_service.ledger import (
    Ledger,
    LedgerError,
    default_ledger_path,
    resolve_ledger_path,
)
from external_query_service.settings import Settings

from .world import provider_row, receipt_for, receipt_source

REPO = Path(__file__).resolve().parents[1]
OBJECTIVE = "Is the literal present in the public source?"
SOURCES = [f"https://example.com/doc-{index}" for index in range(4)]


def make_plan(objective: str = OBJECTIVE) -> EvidencePlan:
    request = build_request(objective, "Choose a source", "Whether to adopt", ["literal_match"])
    return build_plan(request, parse_inventory({"providers": [provider_row()]}))


def make_receipt(plan: EvidencePlan, refs: list[str] = SOURCES) -> EvidenceReceipt:
    sources = [
        receipt_source(
            ref,
            finding=f"finding for {ref}",
            limitation="one page only",
            publication_date="2026-01-02",
            accessed_at="2026-03-01T10:00:00Z",
            content_digest=content_id({"ref": ref}),
        )
        for ref in refs
    ]
    return parse_receipt(
        receipt_for(
            plan.model_dump(mode="json"),
            sources,
            summary="s",
            limitations=[],
            completed_at="2026-03-01T10:01:00Z",
        )
    )


def admitted(plan: EvidencePlan, receipt: EvidenceReceipt, refs: list[str]) -> Admission:
    return decide(plan, receipt, decision="admit", reason="direct", admit_sources=refs)


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    with Ledger(tmp_path / "data" / "ledger.sqlite3") as opened:
        yield opened


def run_python(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


# -- settings and paths --------------------------------------------------------------------


def test_ledger_uses_wal_full_sync_and_a_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path, busy_timeout_ms=1234) as opened:
        db = opened._db
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 1234


def test_default_path_is_under_the_users_data_folder(tmp_path: Path) -> None:
    assert default_ledger_path({"XDG_DATA_HOME": str(tmp_path)}) == (
        tmp_path / "external-query" / "ledger.sqlite3"
    )
    assert default_ledger_path({}) == (
        Path.home() / ".local" / "share" / "external-query" / "ledger.sqlite3"
    )
    # A relative XDG_DATA_HOME is invalid per the spec and ignored.
    assert default_ledger_path({"XDG_DATA_HOME": "rel"}).is_relative_to(Path.home())


def test_explicit_path_beats_settings_which_beat_the_default(tmp_path: Path) -> None:
    settings = Settings.model_validate({"ledger": {"path": str(tmp_path / "s.db")}})
    env = {"XDG_DATA_HOME": str(tmp_path)}
    assert resolve_ledger_path(tmp_path / "x.db", settings, env) == tmp_path / "x.db"
    assert resolve_ledger_path(None, settings, env) == tmp_path / "s.db"
    assert resolve_ledger_path(None, Settings(), env) == default_ledger_path(env)


@pytest.mark.parametrize("kind", ["parent_is_a_file", "path_is_a_folder"])
def test_an_unusable_path_is_a_clean_ledger_error(tmp_path: Path, kind: str) -> None:
    blocker = tmp_path / "blocker"
    if kind == "parent_is_a_file":
        blocker.write_text("not a folder", encoding="utf-8")
        path = blocker / "ledger.sqlite3"
    else:
        blocker.mkdir()
        path = blocker
    with pytest.raises(LedgerError) as caught:
        Ledger(path)
    assert caught.value.reason == "ledger_unavailable"
    assert not caught.value.retryable


def test_a_missing_file_is_not_created_for_read_only_use(tmp_path: Path) -> None:
    path = tmp_path / "absent.sqlite3"
    with pytest.raises(LedgerError):
        Ledger(path, create=False)
    assert not path.exists()


# -- idempotency ---------------------------------------------------------------------------


def test_admitting_twice_leaves_one_record(ledger: Ledger) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    admission = admitted(plan, receipt, SOURCES[:1])
    first = ledger.record_admission(plan, receipt, admission)
    second = ledger.record_admission(plan, receipt, admitted(plan, receipt, SOURCES[:1]))
    assert [item.inserted for item in first] == [True, True, True]
    assert [item.inserted for item in second] == [False, False, False]
    assert [item.seq for item in second] == [item.seq for item in first]
    assert ledger.count("admission") == 1


def test_admitting_from_two_processes_at_once_leaves_one_record(tmp_path: Path) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    admission = admitted(plan, receipt, SOURCES[:2])
    files = {}
    for name, record in (("plan", plan), ("receipt", receipt), ("admission", admission)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(record.model_dump_json(), encoding="utf-8")
    path = tmp_path / "ledger.sqlite3"
    # Both writers open the ledger, say so, and wait for one shared "go": the admissions
    # then race instead of running one after the other. Each reports how many records it
    # inserted itself; the two together must have inserted each record exactly once.
    code = """
        import json, sys
        from external_query_service.ledger import Ledger
        from external_query_service.admission import parse_receipt, verify_plan, verify_admission
        path, plan, receipt, admission = sys.argv[1:]
        load = lambda name: json.load(open(name, encoding="utf-8"))
        plan, receipt = verify_plan(load(plan)), parse_receipt(load(receipt))
        admission = verify_admission(load(admission))
        inserted = 0
        with Ledger(path) as ledger:
            print("ready", flush=True)
            sys.stdin.readline()
            for _ in range(15):
                results = ledger.record_admission(plan, receipt, admission)
                inserted += sum(item.inserted for item in results)
        print(inserted, flush=True)
    """
    args = [str(path), *(str(files[name]) for name in ("plan", "receipt", "admission"))]
    writers = [run_python(code, *args) for _ in range(2)]
    for writer in writers:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    outputs = [writer.communicate(timeout=60) for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], outputs
    assert sum(int(out.strip()) for out, _ in outputs) == 3
    with Ledger(path) as opened:
        assert (opened.count("plan"), opened.count("receipt"), opened.count("admission")) == (
            1,
            1,
            1,
        )
        assert opened.verify().ok


def test_two_writers_of_different_records_never_share_a_seq(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    code = """
        import sys
        from external_query_service.ledger import Ledger
        from external_query_service.admission import content_id
        with Ledger(sys.argv[1]) as ledger:
            for n in range(40):
                body = {"writer": sys.argv[2], "n": n}
                ledger.record("chain", content_id(body), body)
    """
    writers = [run_python(code, str(path), name) for name in ("a", "b")]
    outputs = [writer.communicate(timeout=60) for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], outputs
    with Ledger(path) as opened:
        check = opened.verify()
        assert (check.ok, check.records) == (True, 80)


# -- crashes and tampering -----------------------------------------------------------------

KILL_ROUNDS = 8

# Each iteration writes one admission with its own plan and receipt: three records in one
# transaction, then a progress line. The parent kills the writer right after reading a
# random number of those lines, while it is busy with the next write.
WRITER = """
    import sys
    from external_query_service.ledger import Ledger
    from tests.test_ledger import SOURCES, admitted, make_plan, make_receipt
    with Ledger(sys.argv[1]) as ledger:
        n = int(sys.argv[2])
        while True:
            plan = make_plan(f"Question {n} " + "x" * 400)
            receipt = make_receipt(plan)
            ledger.record_admission(plan, receipt, admitted(plan, receipt, SOURCES[:2]))
            print(n, flush=True)
            n += 1
"""


def test_killing_a_writer_mid_write_leaves_a_sound_ledger(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    rng = random.Random(7)
    for round_number in range(KILL_ROUNDS):
        writer = run_python(WRITER, str(path), str(round_number * 1_000_000))
        assert writer.stdout is not None
        for _ in range(rng.randint(1, 25)):
            assert writer.stdout.readline().strip(), writer.communicate(timeout=30)
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=30)
        assert writer.returncode == -signal.SIGKILL
    with Ledger(path) as opened:
        check = opened.verify()
        assert check.integrity == "ok"
        assert check.ok, check
        # Whole writes only: every admission has its plan and receipt, none is half there.
        admissions = opened.count("admission")
        assert admissions >= KILL_ROUNDS
        assert (opened.count("plan"), opened.count("receipt")) == (admissions, admissions)
        assert check.records == 3 * admissions


def test_a_flipped_byte_in_a_stored_body_is_found_at_its_seq(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    plan = make_plan()
    receipt = make_receipt(plan)
    with Ledger(path) as opened:
        opened.record_admission(plan, receipt, admitted(plan, receipt, SOURCES[:1]))
    db = sqlite3.connect(path)
    body = db.execute("SELECT body FROM records WHERE seq = 2").fetchone()[0]
    flipped = body.replace("finding for", "finding f0r", 1)
    db.execute("UPDATE records SET body = ? WHERE seq = 2", (flipped,))
    db.commit()
    db.close()
    with Ledger(path) as opened:
        check = opened.verify()
    assert (check.ok, check.first_bad_seq, check.problem) == (False, 2, "body_digest_mismatch")


def test_a_rewritten_record_with_a_fresh_body_digest_still_breaks_the_chain(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as opened:
        for n in range(3):
            opened.record("chain", content_id({"n": n}), {"n": n})
    db = sqlite3.connect(path)
    text = '{"n":9}'
    digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    db.execute(
        "UPDATE records SET body = ?, body_digest = ?, digest = ? WHERE seq = 2",
        (text, digest, content_id({"n": 9})),
    )
    db.commit()
    db.close()
    with Ledger(path) as opened:
        check = opened.verify()
    assert (check.first_bad_seq, check.problem) == (2, "chain_broken")


@pytest.mark.parametrize("body", ['{"n":0.5}', '{"n":"\\ud800"}', "not json"])
def test_a_rewritten_body_that_no_longer_hashes_is_reported_not_raised(
    tmp_path: Path, body: str
) -> None:
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as opened:
        opened.record("chain", content_id({"n": 0}), {"n": 0})
    db = sqlite3.connect(path)
    digest = "sha256:" + hashlib.sha256(body.encode()).hexdigest()
    db.execute("UPDATE records SET body = ?, body_digest = ? WHERE seq = 1", (body, digest))
    db.commit()
    db.close()
    with Ledger(path) as opened:
        check = opened.verify()
    assert (check.ok, check.first_bad_seq, check.problem) == (False, 1, "unreadable_body")


# -- projects and readback -----------------------------------------------------------------


def test_starting_a_project_twice_with_the_same_question_is_a_no_op(ledger: Ledger) -> None:
    first = ledger.start_project("research", OBJECTIVE)
    again = ledger.start_project("research", f"  {OBJECTIVE} ")
    assert (first.created, again.created) == (True, False)
    with pytest.raises(ContractRejected) as caught:
        ledger.start_project("research", "Another question")
    assert caught.value.reason == "project_question_conflict"


def test_readback_writes_admitted_sources_and_a_retry_changes_nothing(ledger: Ledger) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    admission = admitted(plan, receipt, SOURCES[:2])
    ledger.start_project("research", OBJECTIVE)
    first = ledger.write_readback("research", plan, receipt, admission)
    assert (first.state, first.written_source_refs, first.write_blockers) == (
        "complete",
        tuple(SOURCES[:2]),
        (),
    )
    retry = ledger.write_readback("research", plan, receipt, admission)
    assert (retry.state, retry.written_source_refs) == ("complete", ())
    assert ledger.project("research").source_count == 2  # type: ignore[union-attr]
    assert ledger.coverage("research", plan, admission).present_source_refs == tuple(SOURCES[:2])


def test_a_wrong_question_is_a_blocker_not_a_crash(ledger: Ledger) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    ledger.start_project("research", "A different question")
    coverage = ledger.write_readback(
        "research", plan, receipt, admitted(plan, receipt, SOURCES[:1])
    )
    assert coverage.write_blockers == ("question_mismatch",)
    assert (coverage.question_matches, coverage.state) == (False, "empty")


def test_a_project_that_was_never_started_is_a_blocker(ledger: Ledger) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    coverage = ledger.write_readback("nope", plan, receipt, admitted(plan, receipt, SOURCES[:1]))
    assert coverage.write_blockers == ("project_not_started",)


def test_an_unrelated_existing_source_blocks_only_that_source(ledger: Ledger) -> None:
    ledger.start_project("research", OBJECTIVE)
    plan = make_plan()
    other = make_receipt(plan, refs=SOURCES[:1])
    ledger.write_readback("research", plan, other, admitted(plan, other, SOURCES[:1]))
    receipt = make_receipt(plan)
    admission = admitted(plan, receipt, SOURCES[:2])
    coverage = ledger.write_readback("research", plan, receipt, admission)
    assert coverage.write_blockers == (f"unrelated_existing_source:{SOURCES[0]}",)
    assert (coverage.state, coverage.present_source_refs) == ("partial_retained", (SOURCES[1],))


def test_an_exhausted_source_budget_keeps_a_partial_projection_retained(ledger: Ledger) -> None:
    ledger.start_project("research", OBJECTIVE, source_budget=3)
    plan = make_plan()
    receipt = make_receipt(plan)
    admission = admitted(plan, receipt, SOURCES)
    coverage = ledger.write_readback("research", plan, receipt, admission)
    assert coverage.write_blockers == (f"source_budget_exhausted:{SOURCES[3]}",)
    assert coverage.state == "partial_retained"
    assert coverage.missing_source_refs == (SOURCES[3],)


def test_a_rejected_admission_writes_nothing(ledger: Ledger) -> None:
    ledger.start_project("research", OBJECTIVE)
    plan = make_plan()
    receipt = make_receipt(plan)
    rejection = decide(plan, receipt, decision="reject", reason="off topic")
    coverage = ledger.write_readback("research", plan, receipt, rejection)
    assert (coverage.written_source_refs, coverage.write_blockers) == ((), ())
    assert ledger.project("research").source_count == 0  # type: ignore[union-attr]


def test_stored_records_round_trip_to_the_contract(ledger: Ledger) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    ledger.record_receipt(plan, receipt)
    body = ledger._db.execute("SELECT body FROM records WHERE kind = 'plan'").fetchone()[0]
    assert verify_plan(json.loads(body)) == plan
    assert ledger.has_record(plan.plan_id)
