"""``--help`` teaches: every flag is described, required flags show as required, and every
command's epilog names its exit codes and gives two examples."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from external_query_service.cli import build_parser, main


def _children(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _walk(
    name: str, parser: argparse.ArgumentParser
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for child, sub in _children(parser).items():
        yield from _walk(f"{name} {child}", sub)


def parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command and sub-command the CLI has."""
    top = _children(build_parser())
    assert {"ask", "evidence", "ledger", "record", "eval", "mcp"} <= set(top)
    return [found for command, parser in top.items() for found in _walk(command, parser)]


PARSERS = parsers()


@pytest.mark.parametrize(("name", "parser"), PARSERS, ids=[name for name, _ in PARSERS])
def test_every_flag_and_argument_has_a_description(
    name: str, parser: argparse.ArgumentParser
) -> None:
    undescribed = [
        action.dest
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
        and (not action.help or action.help == argparse.SUPPRESS)
    ]
    assert undescribed == []


@pytest.mark.parametrize(("name", "parser"), PARSERS, ids=[name for name, _ in PARSERS])
def test_every_epilog_names_the_exit_codes_and_shows_two_examples(
    name: str, parser: argparse.ArgumentParser
) -> None:
    epilog = parser.epilog or ""
    codes = re.search(r"^exit codes:\n((?:  \d  .*\n(?:     .*\n)*)+)", epilog, flags=re.M)
    assert codes is not None, epilog
    assert re.search(r"^  0  ", codes.group(1), flags=re.M)
    assert re.search(r"^  2  ", codes.group(1), flags=re.M)
    examples = epilog.split("examples:\n", 1)[1].splitlines()
    # An example starts at two spaces; its continuation lines are indented further.
    starts = [line for line in examples if line.startswith("  external-query ")]
    assert len(starts) >= 2
    assert all(line.split()[1] == name.split()[0] for line in starts)


@pytest.mark.parametrize(("name", "parser"), PARSERS, ids=[name for name, _ in PARSERS])
def test_required_flags_show_outside_brackets_in_the_usage(
    name: str, parser: argparse.ArgumentParser
) -> None:
    usage = " ".join(parser.format_usage().split())
    for action in parser._actions:
        if action.option_strings and action.required:
            flag = action.option_strings[0]
            assert f" {flag} " in f"{usage} "
            assert f"[{flag}" not in usage


def test_the_evidence_help_walks_through_the_whole_flow(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["evidence", "--help"])
    assert done.value.code == 0
    flow = capsys.readouterr().out.split("\n\n")[1].splitlines()  # the description
    assert flow[0].startswith("discover → plan → receipt → admit → readback → retire")
    steps = [line.split()[0] for line in flow[1:]]
    assert steps == ["discover", "plan", "receipt", "admit", "readback,"]
    assert "retire" in flow[-1]


@pytest.mark.parametrize(
    ("argv", "flags"),
    [
        (["evidence", "admit"], "--plan-json, --receipt-json, --decision, --reason"),
        (["evidence", "plan"], "--objective, --user-activity, --decision, --evidence-kind"),
        (["evidence", "retire"], "--admission-json"),
        (["ledger", "start"], "--project, --question"),
        (["record", "q"], "--config, --out"),
    ],
)
def test_a_missing_required_flag_is_named_on_stderr(
    argv: list[str], flags: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"external-query: error: the following arguments are required: {flags}\n"
