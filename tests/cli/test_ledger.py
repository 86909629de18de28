"""``external-query ledger migrate | verify | copy`` on both backends: what each prints,
and exit 0 done, 2 bad input or an unusable ledger, 3 a ledger that does not verify."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from external_query_service.cli import main
from external_query_service.storage import LedgerTarget, SQLiteLedger, open_ledger
from tests.support.ledger_records import OBJECTIVE, make_chain, raw


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([*args, "--format", "json"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def error(err: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(err)
    return data


def config(tmp_path: Path, ledger: str) -> str:
    path = tmp_path / "external-query.toml"
    path.write_text(f"[ledger]\n{ledger}\n", encoding="utf-8")
    return str(path)


def test_migrate_then_verify_a_new_ledger(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, postgres_url: str
) -> None:
    for target in (str(tmp_path / "new.sqlite3"), postgres_url):
        code, out, _ = run(capsys, "ledger", "migrate", "--ledger", target)
        assert code == 0
        assert json.loads(out)["applied"] == [1]
        code, out, _ = run(capsys, "ledger", "migrate", "--ledger", target)
        assert (code, json.loads(out)["applied"]) == (0, [])
        code, out, _ = run(capsys, "ledger", "verify", "--ledger", target)
        assert code == 0
        assert (json.loads(out)["ok"], json.loads(out)["records"]) == (True, 0)


def test_verify_exits_3_at_the_first_bad_record(
    capsys: pytest.CaptureFixture[str], ledger_target: LedgerTarget
) -> None:
    with open_ledger(ledger_target) as ledger:
        ledger.persist_chain(make_chain(OBJECTIVE))
    raw(ledger_target, "UPDATE records SET body = body || ' ' WHERE seq = 2")
    code, out, err = run(capsys, "ledger", "verify", "--ledger", str(ledger_target))
    assert code == 3
    found = json.loads(out)
    assert (found["ok"], found["first_bad_seq"], found["problem"]) == (
        False,
        2,
        "body_digest_mismatch",
    )
    assert err == "external-query: ledger verify: body_digest_mismatch at seq 2\n"


def test_a_postgres_ledger_without_a_schema_exits_2_and_says_to_migrate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, postgres_url: str
) -> None:
    settings = config(tmp_path, f'url = "{postgres_url}"')
    for command in ("verify", "start"):
        extra = ["--project", "p", "--question", OBJECTIVE] if command == "start" else []
        code, out, err = run(capsys, "ledger", command, "--config", settings, *extra)
        assert (code, out) == (2, "")
        assert error(err)["code"] == "ledger_needs_migration"
        assert "run `external-query ledger migrate`" in error(err)["error"]


def test_the_configs_url_is_the_ledger_every_command_uses(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, postgres_url: str
) -> None:
    settings = config(tmp_path, f'url = "{postgres_url}"')
    assert run(capsys, "ledger", "migrate", "--config", settings)[0] == 0
    code, out, _ = run(
        capsys, "ledger", "start", "--config", settings, "--project", "p", "--question", OBJECTIVE
    )
    assert (code, json.loads(out)["created"]) == (0, True)
    with open_ledger(postgres_url) as ledger:
        assert ledger.project("p") is not None


def test_a_config_naming_both_a_path_and_a_url_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    settings = config(tmp_path, 'path = "l.sqlite3"\nurl = "postgresql://h/db"')
    code, out, err = run(capsys, "ledger", "verify", "--config", settings)
    assert (code, out) == (2, "")
    assert error(err)["code"] == "settings_unreadable"
    assert "not both" in error(err)["error"]


def test_verify_never_creates_a_missing_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "absent.sqlite3"
    code, _, err = run(capsys, "ledger", "verify", "--ledger", str(missing))
    assert (code, error(err)["code"]) == (2, "ledger_unavailable")
    assert not missing.exists()


def test_copy_sqlite_into_postgres_then_again_then_refuse_an_unsound_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, postgres_url: str
) -> None:
    source = tmp_path / "ledger.sqlite3"
    with SQLiteLedger(source) as ledger:
        for n in range(3):
            ledger.persist_chain(make_chain(f"Question {n}"))
    # Not migrated yet: nothing is copied, and the error says what to do.
    code, _, err = run(capsys, "ledger", "copy", "--ledger", str(source), "--to", postgres_url)
    assert (code, error(err)["code"]) == (2, "ledger_needs_migration")
    run(capsys, "ledger", "migrate", "--ledger", postgres_url)
    code, out, _ = run(capsys, "ledger", "copy", "--ledger", str(source), "--to", postgres_url)
    copied = json.loads(out)
    assert code == 0
    assert (copied["records_copied"], copied["verification"]["ok"]) == (12, True)
    code, out, _ = run(capsys, "ledger", "copy", "--ledger", str(source), "--to", postgres_url)
    assert (code, json.loads(out)["records_copied"]) == (0, 0)
    raw(source, "UPDATE records SET body_digest = 'x' WHERE seq = 5")
    code, out, err = run(capsys, "ledger", "copy", "--ledger", str(source), "--to", postgres_url)
    assert (code, out, error(err)["code"]) == (3, "", "ledger_unsound")


def test_copying_a_ledger_onto_itself_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "ledger.sqlite3"
    SQLiteLedger(source).close()
    code, _, err = run(capsys, "ledger", "copy", "--ledger", str(source), "--to", str(source))
    assert (code, error(err)["code"]) == (2, "ledger_copy_conflict")
