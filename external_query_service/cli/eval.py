"""``external-query eval``: run a folder of regression cases and report.

Progress on stderr; the table on stdout; ``report.json`` and ``report.html`` in ``--out``.
Exit codes: 0 every case passed, 1 any case failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from ..errors import InputError
from ..testing.cases import CaseResult, find_case_files, load_cases
from ..testing.evaluation import evaluate
from ..testing.report import render_table, write_reports

__all__ = ["register"]

_BAR = 24


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evaluate_ = commands.add_parser("eval", help="run regression cases and report")
    evaluate_.add_argument("cases", type=Path, help="a folder of case files (or one file)")
    evaluate_.add_argument(
        "--out", type=Path, default=Path("eval-report"), help="folder for report.json/.html"
    )
    evaluate_.set_defaults(handler=run)


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


def run(args: argparse.Namespace) -> int:
    files = find_case_files(args.cases)
    root = args.cases if args.cases.is_dir() else None
    cases = [case for path in files for case in load_cases(path, root=root)]
    if not cases:
        raise InputError(f"{args.cases}: no case files ([[case]] tables) found")
    report = evaluate(cases, progress=_Progress(sys.stderr))
    sys.stdout.write(render_table(report))
    json_path, html_path = write_reports(report, args.out)
    sys.stdout.write(f"reports: {json_path} {html_path}\n")
    return 0 if report.scores.failed == 0 else 1
