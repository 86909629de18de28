"""``external-query init``: a commented starter ``./external-query.toml`` that loads, and an
existing file left as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from external_query_service import Settings
from external_query_service.cli import main
from external_query_service.cli.init import STARTER


def test_init_writes_a_commented_starter_that_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    written = (tmp_path / "external-query.toml").read_text(encoding="utf-8")
    assert written == STARTER
    assert capsys.readouterr().out == "wrote external-query.toml; try: external-query ask --help\n"
    settings = Settings.load(tmp_path / "external-query.toml")
    assert [adapter.kind for adapter in settings.adapters] == ["open_meteo", "frankfurter"]
    # Loopback is listed, and said why: a local search service needs it.
    assert [str(net) for net in settings.network.allowed_networks] == ["127.0.0.1/32", "::1/128"]
    assert "# Private and loopback addresses are refused unless" in written
    for commented in ('# kind = "searxng"', '# mode = "fallback"', '# kind = "local_docs"'):
        assert commented in written


def test_init_never_overwrites_an_existing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "external-query.toml").write_text("# mine\n", encoding="utf-8")
    assert main(["init"]) == 2
    assert capsys.readouterr().err == (
        "external-query: error: external-query.toml already exists; it was left as it is\n"
    )
    assert (tmp_path / "external-query.toml").read_text(encoding="utf-8") == "# mine\n"
