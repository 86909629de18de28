"""Help that teaches: every command names its exit codes and shows two examples.

Command modules build their parsers through ``add_command`` so each ``--help`` ends with
the same two blocks, laid out as written (``RawDescriptionHelpFormatter`` keeps the
description's and the epilog's line breaks; flag help still wraps to the terminal).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TypeAlias

__all__ = ["EXIT_INPUT", "FORMATTER", "Subparsers", "add_command", "epilog"]

FORMATTER = argparse.RawDescriptionHelpFormatter
#: The exit code every command shares for bad input (``cli/__init__.py``).
EXIT_INPUT = (2, "bad input: one line on stderr, nothing on stdout")

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _block(first: str, text: str, indent: int) -> str:
    # A long entry is written with "\n" where it should break; the rest lines up beneath.
    head, *rest = text.split("\n")
    return "\n".join([f"{first}{head}", *(" " * indent + line for line in rest)])


def epilog(exit_codes: Sequence[tuple[int, str]], examples: Sequence[str]) -> str:
    """The ``exit codes:`` and ``examples:`` blocks: one entry per code and per example,
    each laid out as written (a ``\\n`` inside an entry continues it, indented)."""
    codes = "\n".join(_block(f"  {code}  ", meaning, 5) for code, meaning in exit_codes)
    shown = "\n".join(_block("  ", example, 6) for example in examples)
    return f"exit codes:\n{codes}\n\nexamples:\n{shown}"


def add_command(
    commands: Subparsers,
    name: str,
    *,
    summary: str,
    exit_codes: Sequence[tuple[int, str]],
    examples: Sequence[str],
    description: str | None = None,
    parents: Sequence[argparse.ArgumentParser] = (),
) -> argparse.ArgumentParser:
    """A sub-command whose ``--help`` shows ``description`` (default: ``summary``), its
    flags, and the epilog built from ``exit_codes`` and ``examples``."""
    return commands.add_parser(
        name,
        parents=list(parents),
        help=summary,
        description=description or summary,
        epilog=epilog(exit_codes, examples),
        formatter_class=FORMATTER,
    )
