"""The research ledger, on both backends (SQLite file, PostgreSQL schema): schema and
migrations, idempotency across processes, kill safety, tamper evidence, and blockers
reported as results. Backend-specific behaviour is in test_ledger_sqlite.py and
test_ledger_postgres.py."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from external_query_service.admission import (
    ContractRejected,
    content_id,
    decide,
    verify_plan,
)
from external_query_service.storage import (
    BaseLedger,
    LedgerError,
    LedgerTarget,
    migrate_ledger,
    open_ledger,
)
from tests.support.ledger_records import OBJECTIVE, SOURCES, admitted, make_plan, make_receipt, raw
from tests.support.paths import REPO

REPO = REPO


@pytest.fixture
def target(ledger_target: LedgerTarget) -> LedgerTarget:
    return ledger_target


@pytest.fixture
def ledger(target: LedgerTarget) -> Iterator[BaseLedger]:
    with open_ledger(target) as opened:
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


def arg(target: LedgerTarget) -> str:
    return str(target)


# -- schema --------------------------------------------------------------------------------


def test_a_ledger_without_a_schema_asks_for_migrate_and_migrate_is_idempotent(
    target: LedgerTarget,
) -> None:
    raw(target, "DROP TABLE project_sources")
    for table in ("projects", "records", "meta"):
        raw(target, f"DROP TABLE {table}")
    with pytest.raises(LedgerError) as caught:
        open_ledger(target, create=False)
    assert caught.value.reason == "ledger_needs_migration"
    assert "external-query ledger migrate" in str(caught.value)
    first = migrate_ledger(target)
    again = migrate_ledger(target)
    assert (first.from_version, first.to_version, first.applied) == (0, 1, (1,))
    assert (again.from_version, again.applied) == (1, ())
    with open_ledger(target, create=False) as opened:
        assert opened.verify().ok


def test_an_older_schema_is_refused_until_migrated(target: LedgerTarget) -> None:
    raw(target, "UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(LedgerError) as caught:
        open_ledger(target)
    assert caught.value.reason == "ledger_needs_migration"
    assert "this program needs 1: run `external-query ledger migrate`" in str(caught.value)
    assert migrate_ledger(target).applied == (1,)
    with open_ledger(target) as opened:
        assert opened.schema_version() == 1


def test_a_newer_schema_is_refused_by_opening_and_by_migrate(target: LedgerTarget) -> None:
    raw(target, "UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    for attempt in (lambda: open_ledger(target), lambda: migrate_ledger(target)):
        with pytest.raises(LedgerError) as caught:
            attempt()
        assert caught.value.reason == "ledger_unavailable"
        assert "upgrade external-query" in str(caught.value)


# -- idempotency ---------------------------------------------------------------------------


def test_admitting_twice_leaves_one_record(ledger: BaseLedger) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    admission = admitted(plan, receipt, SOURCES[:1])
    first = ledger.record_admission(plan, receipt, admission)
    second = ledger.record_admission(plan, receipt, admitted(plan, receipt, SOURCES[:1]))
    assert [item.inserted for item in first] == [True, True, True]
    assert [item.inserted for item in second] == [False, False, False]
    assert [item.seq for item in second] == [item.seq for item in first]
    assert ledger.count("admission") == 1


def test_admitting_from_two_processes_at_once_leaves_one_record(
    target: LedgerTarget, tmp_path: Path
) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    admission = admitted(plan, receipt, SOURCES[:2])
    files = {}
    for name, record in (("plan", plan), ("receipt", receipt), ("admission", admission)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(record.model_dump_json(), encoding="utf-8")
    # Both writers open the ledger, say so, and wait for one shared "go": the admissions
    # then race instead of running one after the other. Each reports how many records it
    # inserted itself; the two together must have inserted each record exactly once.
    code = """
        import json, sys
        from external_query_service.storage import open_ledger, parse_ledger_target
        from external_query_service.admission import parse_receipt, verify_plan, verify_admission
        target, plan, receipt, admission = sys.argv[1:]
        load = lambda name: json.load(open(name, encoding="utf-8"))
        plan, receipt = verify_plan(load(plan)), parse_receipt(load(receipt))
        admission = verify_admission(load(admission))
        inserted = 0
        with open_ledger(parse_ledger_target(target)) as ledger:
            print("ready", flush=True)
            sys.stdin.readline()
            for _ in range(15):
                results = ledger.record_admission(plan, receipt, admission)
                inserted += sum(item.inserted for item in results)
        print(inserted, flush=True)
    """
    args = [arg(target), *(str(files[name]) for name in ("plan", "receipt", "admission"))]
    writers = [run_python(code, *args) for _ in range(2)]
    for writer in writers:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready", writer.communicate(timeout=30)
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    outputs = [writer.communicate(timeout=60) for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], outputs
    assert sum(int(out.strip()) for out, _ in outputs) == 3
    with open_ledger(target) as opened:
        counts = (opened.count("plan"), opened.count("receipt"), opened.count("admission"))
        assert counts == (1, 1, 1)
        assert opened.verify().ok


def test_two_writers_of_different_records_never_share_a_seq(target: LedgerTarget) -> None:
    code = """
        import sys
        from external_query_service.storage import open_ledger, parse_ledger_target
        from external_query_service.admission import content_id
        with open_ledger(parse_ledger_target(sys.argv[1])) as ledger:
            for n in range(40):
                body = {"writer": sys.argv[2], "n": n}
                ledger.record("chain", content_id(body), body)
    """
    writers = [run_python(code, arg(target), name) for name in ("a", "b")]
    outputs = [writer.communicate(timeout=60) for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], outputs
    with open_ledger(target) as opened:
        check = opened.verify()
        assert (check.ok, check.records) == (True, 80)


# -- crashes and tampering -----------------------------------------------------------------

KILL_ROUNDS = 4

# Each iteration writes one admission with its own plan and receipt: three records in one
# transaction, then reports the admission's id. The parent kills the writers at random
# moments, while they are busy with the next write.
WRITER = """
    import sys
    from external_query_service.storage import open_ledger, parse_ledger_target
    from tests.support.ledger_records import SOURCES, admitted, make_plan, make_receipt
    with open_ledger(parse_ledger_target(sys.argv[1])) as ledger:
        n = int(sys.argv[2])
        while True:
            plan = make_plan(f"Question {n} " + "x" * 400)
            receipt = make_receipt(plan)
            admission = admitted(plan, receipt, SOURCES[:2])
            ledger.record_admission(plan, receipt, admission)
            print(admission.admission_id, flush=True)
            n += 1
"""


def test_killing_writers_mid_write_leaves_a_sound_ledger_with_every_reported_write(
    target: LedgerTarget,
) -> None:
    rng = random.Random(7)
    reported: list[str] = []
    for round_number in range(KILL_ROUNDS):
        # Two writers at once, so one is killed while the other may hold the lock.
        writers = [
            run_python(WRITER, arg(target), str((round_number * 2 + side) * 1_000_000))
            for side in range(2)
        ]
        for writer in writers:
            assert writer.stdout is not None
            for _ in range(rng.randint(1, 12)):
                line = writer.stdout.readline()
                assert line.strip(), writer.communicate(timeout=30)
                reported.append(line.strip())
        for writer in writers:
            writer.send_signal(signal.SIGKILL)
        for writer in writers:
            # Read through the same text stream as readline() above: what it has already
            # buffered past the last line read is part of the output (communicate() would
            # read the pipe alone and could start mid-line).
            assert writer.stdout is not None
            out = writer.stdout.read()
            writer.communicate(timeout=30)  # waits, and closes the other pipes
            assert writer.returncode == -signal.SIGKILL
            # Whatever it reported before dying counts too; a torn last line does not.
            reported.extend(line for line in out.split("\n")[:-1] if line)
    with open_ledger(target) as opened:
        check = opened.verify()
        assert check.integrity == "ok"
        assert check.ok, check
        assert [ref for ref in reported if not opened.has_record(ref)] == []
        # Whole writes only: every admission has its plan and receipt, none is half there.
        admissions = opened.count("admission")
        assert admissions >= len(set(reported)) >= KILL_ROUNDS * 2
        assert (opened.count("plan"), opened.count("receipt")) == (admissions, admissions)
        assert check.records == 3 * admissions


def test_a_flipped_byte_in_a_stored_body_is_found_at_its_seq(target: LedgerTarget) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    with open_ledger(target) as opened:
        opened.record_admission(plan, receipt, admitted(plan, receipt, SOURCES[:1]))
    body = raw(target, "SELECT body FROM records WHERE seq = 2")[0][0]
    flipped = body.replace("finding for", "finding f0r", 1)
    raw(target, "UPDATE records SET body = ? WHERE seq = 2", (flipped,))
    with open_ledger(target) as opened:
        check = opened.verify()
    assert (check.ok, check.first_bad_seq, check.problem) == (False, 2, "body_digest_mismatch")


def test_a_rewritten_record_with_a_fresh_body_digest_still_breaks_the_chain(
    target: LedgerTarget,
) -> None:
    with open_ledger(target) as opened:
        for n in range(3):
            opened.record("chain", content_id({"n": n}), {"n": n})
    text = '{"n":9}'
    digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    raw(
        target,
        "UPDATE records SET body = ?, body_digest = ?, digest = ? WHERE seq = 2",
        (text, digest, content_id({"n": 9})),
    )
    with open_ledger(target) as opened:
        check = opened.verify()
    assert (check.first_bad_seq, check.problem) == (2, "chain_broken")


def test_a_deleted_record_is_a_seq_gap(target: LedgerTarget) -> None:
    with open_ledger(target) as opened:
        for n in range(3):
            opened.record("chain", content_id({"n": n}), {"n": n})
    raw(target, "DELETE FROM records WHERE seq = 2")
    with open_ledger(target) as opened:
        check = opened.verify()
    assert (check.ok, check.first_bad_seq, check.problem) == (False, 3, "seq_gap")


@pytest.mark.parametrize("body", ['{"n":0.5}', '{"n":"\\ud800"}', "not json"])
def test_a_rewritten_body_that_no_longer_hashes_is_reported_not_raised(
    target: LedgerTarget, body: str
) -> None:
    with open_ledger(target) as opened:
        opened.record("chain", content_id({"n": 0}), {"n": 0})
    digest = "sha256:" + hashlib.sha256(body.encode()).hexdigest()
    raw(target, "UPDATE records SET body = ?, body_digest = ? WHERE seq = 1", (body, digest))
    with open_ledger(target) as opened:
        check = opened.verify()
    assert (check.ok, check.first_bad_seq, check.problem) == (False, 1, "unreadable_body")


# -- projects and readback -----------------------------------------------------------------


def test_starting_a_project_twice_with_the_same_question_is_a_no_op(ledger: BaseLedger) -> None:
    first = ledger.start_project("research", OBJECTIVE)
    again = ledger.start_project("research", f"  {OBJECTIVE} ")
    assert (first.created, again.created) == (True, False)
    with pytest.raises(ContractRejected) as caught:
        ledger.start_project("research", "Another question")
    assert caught.value.reason == "project_question_conflict"


def test_readback_writes_admitted_sources_and_a_retry_changes_nothing(ledger: BaseLedger) -> None:
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
    assert sorted(ledger.downstream_for(admission)) == sorted(
        (ref, receipt.source(ref).content_digest) for ref in SOURCES[:2]
    )


def test_a_wrong_question_is_a_blocker_not_a_crash(ledger: BaseLedger) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    ledger.start_project("research", "A different question")
    coverage = ledger.write_readback(
        "research", plan, receipt, admitted(plan, receipt, SOURCES[:1])
    )
    assert coverage.write_blockers == ("question_mismatch",)
    assert (coverage.question_matches, coverage.state) == (False, "empty")


def test_a_project_that_was_never_started_is_a_blocker(ledger: BaseLedger) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    coverage = ledger.write_readback("nope", plan, receipt, admitted(plan, receipt, SOURCES[:1]))
    assert coverage.write_blockers == ("project_not_started",)
    assert ledger.project("nope") is None


def test_an_unrelated_existing_source_blocks_only_that_source(ledger: BaseLedger) -> None:
    ledger.start_project("research", OBJECTIVE)
    plan = make_plan()
    other = make_receipt(plan, refs=SOURCES[:1])
    ledger.write_readback("research", plan, other, admitted(plan, other, SOURCES[:1]))
    receipt = make_receipt(plan)
    admission = admitted(plan, receipt, SOURCES[:2])
    coverage = ledger.write_readback("research", plan, receipt, admission)
    assert coverage.write_blockers == (f"unrelated_existing_source:{SOURCES[0]}",)
    assert (coverage.state, coverage.present_source_refs) == ("partial_retained", (SOURCES[1],))


def test_an_exhausted_source_budget_keeps_a_partial_projection_retained(
    ledger: BaseLedger,
) -> None:
    ledger.start_project("research", OBJECTIVE, source_budget=3)
    plan = make_plan()
    receipt = make_receipt(plan)
    admission = admitted(plan, receipt, SOURCES)
    coverage = ledger.write_readback("research", plan, receipt, admission)
    assert coverage.write_blockers == (f"source_budget_exhausted:{SOURCES[3]}",)
    assert coverage.state == "partial_retained"
    assert coverage.missing_source_refs == (SOURCES[3],)


def test_a_rejected_admission_writes_nothing(ledger: BaseLedger) -> None:
    ledger.start_project("research", OBJECTIVE)
    plan = make_plan()
    receipt = make_receipt(plan)
    rejection = decide(plan, receipt, decision="reject", reason="off topic")
    coverage = ledger.write_readback("research", plan, receipt, rejection)
    assert (coverage.written_source_refs, coverage.write_blockers) == ((), ())
    assert ledger.project("research").source_count == 0  # type: ignore[union-attr]


def test_stored_records_round_trip_to_the_contract(
    ledger: BaseLedger, target: LedgerTarget
) -> None:
    plan = make_plan()
    receipt = make_receipt(plan)
    ledger.record_receipt(plan, receipt)
    body = raw(target, "SELECT body FROM records WHERE kind = 'plan'")[0][0]
    assert verify_plan(json.loads(body)) == plan
    assert ledger.has_record(plan.plan_id)
