"""The embedded SQLite ledger: durability settings, where the file lives, which ledger a
setting names, and clean errors for a path that cannot be a ledger."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from external_query_service.errors import SettingsError
from external_query_service.settings import Settings
from external_query_service.storage import (
    LedgerError,
    SQLiteLedger,
    default_ledger_path,
    open_ledger,
    resolve_ledger,
)
from external_query_service.storage import SQLiteLedger as Ledger


def test_ledger_uses_wal_full_sync_and_a_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    with SQLiteLedger(path, busy_timeout_ms=1234) as opened:
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


def test_explicit_ledger_beats_settings_which_beat_the_default(tmp_path: Path) -> None:
    by_path = Settings.model_validate({"ledger": {"path": str(tmp_path / "s.db")}})
    url = "postgresql://ledger@db.internal/research?options=-csearch_path%3Dl"
    by_url = Settings.model_validate({"ledger": {"url": url}})
    env = {"XDG_DATA_HOME": str(tmp_path)}
    assert resolve_ledger(str(tmp_path / "x.db"), by_url, env) == tmp_path / "x.db"
    assert resolve_ledger("postgres://h/db", by_path, env) == "postgres://h/db"
    assert resolve_ledger(None, by_path, env) == tmp_path / "s.db"
    assert resolve_ledger(None, by_url, env) == url  # unchanged, query included
    assert resolve_ledger(None, Settings(), env) == default_ledger_path(env)


@pytest.mark.parametrize(
    ("ledger", "message"),
    [
        ({"path": "a.sqlite3", "url": "postgresql://h/db"}, "not both"),
        ({"url": "mysql://h/db"}, "must start with postgresql:// or postgres://"),
    ],
)
def test_a_ledger_setting_naming_two_ledgers_or_another_database_is_refused(
    ledger: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_mapping({"ledger": ledger})


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
        open_ledger(path)
    assert caught.value.reason == "ledger_unavailable"
    assert not caught.value.retryable


def test_a_missing_file_is_not_created_for_read_only_use(tmp_path: Path) -> None:
    path = tmp_path / "absent.sqlite3"
    with pytest.raises(LedgerError):
        open_ledger(path, create=False)
    assert not path.exists()


def test_a_file_with_other_tables_is_never_migrated_by_opening(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (text TEXT)")
    db.commit()
    db.close()
    with pytest.raises(LedgerError) as caught:
        open_ledger(path)
    assert caught.value.reason == "ledger_needs_migration"
    db = sqlite3.connect(path)
    tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    db.close()
    assert tables == [("notes",)]


def test_the_former_import_path_still_opens_a_sqlite_file(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.sqlite3") as opened:
        assert isinstance(opened, SQLiteLedger)
        assert opened.verify().ok
