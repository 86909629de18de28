"""The anchored ledger: the head (last seq, chain value, record count) is written to a
second place on every commit, and ``ledger verify`` compares the chain with it, so
records cut off the end are ``head_mismatch`` (exit 3), on both backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from external_query_service.cli import main
from external_query_service.storage import LedgerError, LedgerHead, LedgerTarget, open_ledger
from tests.support.ledger_records import make_chain, raw


def fill(target: LedgerTarget, answers: int) -> None:
    with open_ledger(target) as ledger:
        for n in range(answers):
            ledger.persist_chain(make_chain(f"Question {n}"))


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object], str]:
    code = main(["ledger", "verify", *args, "--format", "json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else {}, captured.err


def test_the_head_follows_every_commit(ledger_target: LedgerTarget) -> None:
    with open_ledger(ledger_target) as ledger:
        assert ledger.stored_head() is None
        ledger.persist_chain(make_chain("First question"))
        first = ledger.stored_head()
        ledger.persist_chain(make_chain("First question"))  # idempotent: nothing moves
        assert ledger.stored_head() == first
        ledger.persist_chain(make_chain("Second question"))
        second = ledger.stored_head()
        check = ledger.verify()

    assert first is not None
    assert second is not None
    assert (first.seq, first.records) == (4, 4)
    assert (second.seq, second.records) == (8, 8)
    assert check.ok
    assert (check.head_seq, check.records, check.last_chain) == (8, 8, second.chain)


def test_deleting_the_newest_records_is_a_head_mismatch_exit_3(
    capsys: pytest.CaptureFixture[str], ledger_target: LedgerTarget
) -> None:
    fill(ledger_target, 3)
    raw(ledger_target, "DELETE FROM records WHERE seq > 8")
    code, found, err = verify(capsys, "--ledger", str(ledger_target))

    assert code == 3
    assert (found["ok"], found["problem"], found["first_bad_seq"]) == (False, "head_mismatch", 9)
    assert (found["records"], found["head_seq"]) == (8, 12)
    assert err == "external-query: ledger verify: head_mismatch at seq 9\n"


def test_a_rewritten_history_misses_a_head_kept_elsewhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Someone who can write both places rewrites both: only a head kept elsewhere (here
    # the caller's own note of an earlier verify) still tells.
    target = tmp_path / "ledger.sqlite3"
    fill(target, 2)
    code, found, _ = verify(capsys, "--ledger", str(target))
    kept = f"{found['records']}:{found['last_chain']}"
    raw(target, "DELETE FROM records WHERE seq > 4")
    [(chain,)] = raw(target, "SELECT chain FROM records WHERE seq = 4")
    rewritten = LedgerHead(seq=4, chain=chain, records=4)
    Path(f"{target}.head").write_text(rewritten.sealed_json(), encoding="utf-8")
    with open_ledger(target) as ledger:  # other records at 5..8; a fresh head beside them
        ledger.persist_chain(make_chain("Another question"))

    code, found, _ = verify(capsys, "--ledger", str(target))
    assert (code, found["ok"]) == (0, True)  # the ledger and its head agree
    code, found, _err = verify(capsys, "--ledger", str(target), "--expect-head", kept)
    assert (code, found["problem"], found["first_bad_seq"]) == (3, "head_mismatch", 8)
    code, found, _ = verify(capsys, "--ledger", str(target), "--expect-head", "4:" + "0" * 64)
    assert (code, found["problem"]) == (3, "head_mismatch")


def test_a_head_edited_on_its_own_does_not_verify(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "ledger.sqlite3"
    fill(target, 2)
    head_file = Path(f"{target}.head")
    sealed = json.loads(head_file.read_text(encoding="utf-8"))
    head_file.write_text(json.dumps({**sealed, "seq": 4, "records": 4}), encoding="utf-8")
    raw(target, "DELETE FROM records WHERE seq > 4")

    code, found, _ = verify(capsys, "--ledger", str(target))
    assert (code, found["problem"]) == (3, "head_mismatch")


def test_a_writer_stopped_between_commit_and_head_leaves_a_head_behind_that_verifies(
    tmp_path: Path,
) -> None:
    target = tmp_path / "ledger.sqlite3"
    fill(target, 1)
    head_file = Path(f"{target}.head")
    behind = head_file.read_text(encoding="utf-8")
    fill(target, 2)  # "Question 1" added; the head moved on…
    head_file.write_text(behind, encoding="utf-8")  # …and is put back as if never written

    with open_ledger(target) as ledger:
        check = ledger.verify()
    assert check.ok
    assert (check.head_seq, check.records) == (4, 8)


@pytest.mark.parametrize("spelled", ["", "x:sha256:ab", "0:" + "a" * 64, "3:sha256:" + "g" * 64])
def test_an_expected_head_that_is_not_seq_digest_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spelled: str
) -> None:
    target = tmp_path / "ledger.sqlite3"
    fill(target, 1)
    code = main(["ledger", "verify", "--ledger", str(target), "--expect-head", spelled])
    err = capsys.readouterr().err
    assert code == 2
    assert "ledger_head_invalid" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(LedgerError):
        LedgerHead.parse(spelled)


def drop_head(target: LedgerTarget) -> None:
    """Delete the head where the backend keeps it (the file beside SQLite, the meta row)."""
    if isinstance(target, Path):
        Path(f"{target}.head").unlink()
    else:
        raw(target, "DELETE FROM meta WHERE key = 'head'")


def corrupt_head(target: LedgerTarget) -> str:
    """Overwrite the head with text that is no sealed head; that text."""
    garbage = '{"seq": 12, "chain": "sha256:tampered"}'
    if isinstance(target, Path):
        Path(f"{target}.head").write_text(garbage, encoding="utf-8")
    else:
        raw(target, "UPDATE meta SET value = ? WHERE key = 'head'", (garbage,))
    return garbage


def stored_head_text(target: LedgerTarget) -> str:
    if isinstance(target, Path):
        return Path(f"{target}.head").read_text(encoding="utf-8")
    [(value,)] = raw(target, "SELECT value FROM meta WHERE key = 'head'")
    return str(value)


@pytest.mark.parametrize("cut", [False, True], ids=["records-kept", "newest-records-cut"])
def test_records_without_a_head_are_a_head_mismatch_exit_3(
    capsys: pytest.CaptureFixture[str], ledger_target: LedgerTarget, cut: bool
) -> None:
    fill(ledger_target, 3)
    if cut:
        raw(ledger_target, "DELETE FROM records WHERE seq > 8")
    drop_head(ledger_target)
    code, found, err = verify(capsys, "--ledger", str(ledger_target))

    assert code == 3
    assert (found["ok"], found["problem"], found["first_bad_seq"]) == (False, "head_mismatch", 1)
    assert found["head_seq"] is None
    assert err == "external-query: ledger verify: head_mismatch at seq 1\n"


def test_an_empty_ledger_without_a_head_verifies(ledger_target: LedgerTarget) -> None:
    with open_ledger(ledger_target) as ledger:
        assert ledger.verify().ok


@pytest.mark.parametrize("tamper", ["deleted", "corrupt", "beyond-the-chain"])
def test_no_writer_replaces_a_head_it_cannot_verify(
    capsys: pytest.CaptureFixture[str], ledger_target: LedgerTarget, tamper: str
) -> None:
    fill(ledger_target, 3)
    if tamper == "deleted":
        drop_head(ledger_target)
    elif tamper == "corrupt":
        corrupt_head(ledger_target)
    else:  # the newest records cut off, the sealed head left as it was
        raw(ledger_target, "DELETE FROM records WHERE seq > 8")
    before = None if tamper == "deleted" else stored_head_text(ledger_target)

    with (
        open_ledger(ledger_target) as ledger,
        pytest.raises(LedgerError) as refused,
    ):
        ledger.persist_chain(make_chain("A later question"))

    assert refused.value.reason == "ledger_head_mismatch"
    [(count,)] = raw(ledger_target, "SELECT COUNT(*) FROM records")
    assert count == (8 if tamper == "beyond-the-chain" else 12)  # nothing was written
    if before is None:
        with open_ledger(ledger_target) as ledger:
            assert ledger.stored_head() is None
    else:
        assert stored_head_text(ledger_target).strip() == before.strip()
    code, found, _ = verify(capsys, "--ledger", str(ledger_target))
    assert (code, found["problem"]) == (3, "head_mismatch")  # the evidence is still there
