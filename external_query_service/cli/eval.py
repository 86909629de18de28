"""``external-query eval``: run a folder of regression cases and report.

Progress on stderr; the table on stdout, with one line explaining each figure and the
paths of ``report.json`` and ``report.html`` (in ``--out``, default ``eval-report``).
Exit codes: 0 every case passed, 1 any case failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from ..errors import InputError
from ..testing._cases import CaseResult, find_case_files, load_cases
from ..testing._evaluation import evaluate
from ..testing._report import render_table, write_reports
from ._help import EXIT_INPUT, Subparsers, add_command

__all__ = ["DEFAULT_OUT", "register"]

#: Where the reports go without ``--out`` (relative to the working folder).
DEFAULT_OUT = Path("eval-report")
_BAR = 24


def register(commands: Subparsers) -> None:
    """Add the ``eval`` command to ``commands``."""
    evaluate_ = add_command(
        commands,
        "eval",
        summary="run regression cases and report",
        description="Run every [[case]] in a folder of case files, each against its world "
        "(offline),\nprint a table with the scores, and write report.json and report.html.",
        exit_codes=[
            (0, "every case passed"),
            (1, "some case failed (the table says which)"),
            EXIT_INPUT,
        ],
        examples=[
            "external-query eval examples/cases",
            "external-query eval examples/cases/weather_zh.toml --out reports/weather",
        ],
    )
    evaluate_.add_argument("cases", type=Path, help="a folder of case files (or one file)")
    evaluate_.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"folder for report.json and report.html (default: ./{DEFAULT_OUT})",
    )
    evaluate_.set_defaults(handler=_run)


class _Progress:
    """A progress bar on a terminal, one line per case otherwise (logs, CI)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._live = stream.isatty()

    def __call__(self, done: int, total: int, result: CaseResult) -> None:
        mark = "ok" if result.passed else "FAIL"
        if self._live:
            filled = _BAR * done // max(total, 1)
            bar = "#" * filled + "-" * (_BAR - filled)
            self._stream.write(f"\r[{bar}] {done}/{total} {mark:<4} {result.case.id[:60]:<60}")
            if done == total:
                self._stream.write("\n")
        else:
            self._stream.write(f"[{done}/{total}] {mark:<4} {result.case.id}\n")
        self._stream.flush()


def _run(args: argparse.Namespace) -> int:
    files = find_case_files(args.cases)
    root = args.cases if args.cases.is_dir() else None
    cases = [case for path in files for case in load_cases(path, root=root)]
    if not cases:
        raise InputError(f"{args.cases}: no case files ([[case]] tables) found")
    report = evaluate(cases, progress=_Progress(sys.stderr))
    sys.stdout.write(render_table(report))
    json_path, html_path = write_reports(report, args.out)
    sys.stdout.write(f"\nreport: {json_path} (and {html_path.name} beside it)\n")
    return 0 if report.scores.failed == 0 else 1
