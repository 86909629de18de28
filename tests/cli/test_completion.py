"""Shell completion: ``completion SHELL`` prints the code, and a shell asking (argcomplete's
protocol) gets the commands and flags of the real parser."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from external_query_service.cli import main
from tests.support.paths import REPO
from tests.support.serving import CLI


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_shell_code(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == 0
    code = capsys.readouterr().out
    assert "external-query" in code
    assert "_ARGCOMPLETE" in code  # the variable the program answers to


def completions(tmp_path: Path, line: str) -> list[str]:
    """What the program offers a shell completing ``line`` (cursor at its end)."""
    out = tmp_path / "completions"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
    }
    subprocess.run([*CLI], env=env, check=True, timeout=60, stdin=subprocess.DEVNULL)
    return out.read_text(encoding="utf-8").split("\n")


def test_a_shell_completes_commands_and_each_commands_flags(tmp_path: Path) -> None:
    assert completions(tmp_path, "external-query se") == ["serve "]
    assert {"init", "completion", "ask", "mcp"} <= {
        item.strip() for item in completions(tmp_path, "external-query ")
    }
    assert completions(tmp_path, "external-query serve --wo") == ["--world", "--workers"]
