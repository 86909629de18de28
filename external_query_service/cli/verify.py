"""``external-query verify``: check an answer bundle again, offline or against its pages.

Reads a bundle (``ask --format bundle``, ``answer.bundle()``, ``"bundle": true`` on
``/v1/answer``) and prints one line per source and a summary; the exit code is the verdict
(``EXIT_CODES``), so a script can tell a bundle that holds from one that was edited or
whose pages changed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

from .._bundle import MAX_BUNDLE_BYTES
from .._jsonio import read_regular_file
from ..bundle import BundleVerdict, BundleVerification, verify_bundle
from ..settings import Settings
from ._help import EXIT_INPUT, Subparsers, add_command

__all__ = ["EXIT_CODES", "register", "render_markdown"]

#: The exit code of each verdict: 0 only when everything holds; 2 is bad input, as for
#: every command.
EXIT_CODES: Final[dict[BundleVerdict, int]] = {
    "holds": 0,
    "tampered": 3,
    "changed": 4,
    "gone": 5,
    "unreachable": 6,
}


def register(commands: Subparsers) -> None:
    """Add the ``verify`` command to ``commands``."""
    verify = add_command(
        commands,
        "verify",
        summary="check an answer bundle again: offline, or --refetch its cited pages",
        description="Check BUNDLE (a file written by `ask --format bundle`; '-' reads stdin). "
        "Offline, its id,\nevery source's id and its signature ([bundle] signing_key_env) are "
        "recomputed: an edited\nbundle is tampered. --refetch fetches every cited page again "
        "through the same guarded\nfetcher and limits ([network] of --config), reads it with "
        "the same reader, and looks for\neach quote: holds, changed (the closest passage is "
        "named), gone or unreachable.\nThe answer holds only when every quote holds.",
        exit_codes=[
            (0, "holds: every digest (and, with --refetch, every quote) holds"),
            EXIT_INPUT,
            (EXIT_CODES["tampered"], "tampered: the bundle was edited, or its signature fails"),
            (EXIT_CODES["changed"], "changed: a page is there but a quote is not"),
            (EXIT_CODES["gone"], "gone: a page answers 404/410, is refused or no document"),
            (EXIT_CODES["unreachable"], "unreachable: a page did not answer (retryable)"),
            (1, "an internal failure"),
        ],
        examples=[
            "external-query verify answer.bundle.json",
            "external-query verify answer.bundle.json --refetch --config external-query.toml "
            "\\\n--format json",
        ],
    )
    verify.add_argument("bundle", metavar="BUNDLE", help="the bundle file; '-' reads stdin")
    verify.add_argument(
        "--refetch",
        action="store_true",
        help="fetch every cited page again and look for each quote (default: offline only)",
    )
    verify.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="settings file (TOML): [network] for --refetch, [bundle] signing_key_env, [ledger]",
    )
    verify.add_argument(
        "--format",
        choices=["markdown", "json"],
        default="markdown",
        help="markdown: one line per source and a summary (default); json: one object",
    )
    verify.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    settings = Settings.load(args.config) if args.config else Settings()
    if args.bundle == "-":
        text = sys.stdin.buffer.read(MAX_BUNDLE_BYTES + 1)
    else:
        text = read_regular_file(args.bundle, max_bytes=MAX_BUNDLE_BYTES)
    result = verify_bundle(text, settings=settings, refetch=args.refetch)
    if args.format == "json":
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        sys.stdout.write(render_markdown(result))
    return EXIT_CODES[result.verdict]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render_markdown(result: BundleVerification) -> str:
    """One line per source, then the summary: the verdict, how it was checked, the ledger."""
    lines = [f"# Bundle {result.bundle_id}", ""]
    for source in result.sources:
        page = f" (page {source.page})" if source.page is not None else ""
        line = f"- **{source.verdict}** <{source.url}>{page}: {_one_line(source.detail)}"
        if source.closest is not None:
            line += f"; closest passage: 「{_one_line(source.closest)}」"
        lines.append(line)
    if not result.sources:
        lines.append(f"- no quoted source (the answer is {result.status})")
    how = "refetched" if result.refetched else "offline"
    ledger = result.ledger_detail or result.ledger.replace("_", " ")
    lines += [
        "",
        f"**{result.verdict}** ({how}; signature {result.signature}; ledger: {ledger}): "
        f"{_one_line(result.detail)}",
    ]
    return "\n".join(lines) + "\n"
