"""``ask --progress``: the plan, each attempt and the verdict on stderr as they happen; by
default only when stderr is a terminal."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from external_query_service.cli import main
from tests.support.serving import DOCS_QUESTION, write_docs

LINES = [
    "plan: documentation (summary_with_sources, from upstream_semantics)",
    "attempt: docs ok (0 pages read)",  # local documents are not fetched pages
    "verified: answered",
]


def ask(tmp_path: Path, *flags: str) -> list[str]:
    return ["ask", DOCS_QUESTION, "--docs", str(write_docs(tmp_path / "docs")), *flags]


def test_progress_prints_each_stage_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(ask(tmp_path, "--progress")) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == LINES
    assert "verifier" in captured.out  # the answer itself stays on stdout
    assert "plan:" not in captured.out


def test_progress_is_off_when_stderr_is_not_a_terminal_and_on_when_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(ask(tmp_path)) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(ask(tmp_path)) == 0
    assert capsys.readouterr().err.splitlines() == LINES
    assert main(ask(tmp_path, "--no-progress")) == 0
    assert capsys.readouterr().err == ""
