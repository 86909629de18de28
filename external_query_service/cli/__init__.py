"""``external-query``: a thin CLI over the public API (parse, call, print).

Each command group lives in its own module and registers its sub-parser here. Exit codes:
0 done (for ``ask``: any of the three outcomes — the status is in the output); 2 bad input
or an unusable ledger, one line on stderr; 1 an internal failure, a message and never a bare
traceback. Command groups may define further codes (documented with the group).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from .._version import __version__
from ..errors import InputError

__all__ = [
    "COMPLETING",
    "PROG",
    "ArgumentParser",
    "build_parser",
    "main",
    "run",
]

PROG = "external-query"
#: Set by the shell function ``completion`` prints while it asks for completions.
COMPLETING = "_ARGCOMPLETE"


def _command_modules() -> list[str]:
    """Every public module in this package defines ``register(subparsers)``."""
    return sorted(
        f"{__name__}.{info.name}"
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_")
    )


class ArgumentParser(argparse.ArgumentParser):
    """Turns argparse's usage errors into ``InputError`` (one line, exit code 2)."""

    def error(self, message: str) -> NoReturn:
        raise InputError(message)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``external-query`` parser with every command registered; with ``command`` naming
    a command module of its own (``ask``, ``eval``, ``record``, ``serve``), that module
    alone, so a one-shot run does not import what the other commands need."""
    parser = ArgumentParser(prog=PROG, description="Answer questions only from external evidence.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    modules = _command_modules()
    own = f"{__name__}.{command}"
    for name in [own] if command and own in modules else modules:
        importlib.import_module(name).register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` and return its exit code: 2 for bad input (one line on stderr),
    130 when interrupted, 1 for an internal failure (a traceback only with
    ``EXTERNAL_QUERY_DEBUG`` set)."""
    if argv is None and COMPLETING in os.environ:
        _complete()  # a shell asking for completions: answered, then the process ends
    try:
        given = list(sys.argv[1:] if argv is None else argv)
        first = given[0] if given and not given[0].startswith("-") else None
        args = build_parser(first).parse_args(given)
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except _ledger_error() as exc:
        # A ledger that cannot be used as configured (needs migrating, a missing folder or
        # driver) is the caller's to fix, like bad input: one line naming what to do.
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("EXTERNAL_QUERY_DEBUG"):
            traceback.print_exc()
        print(f"{PROG}: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _complete() -> None:
    """Answer a shell's completion request (argcomplete's protocol) from the full parser."""
    import argcomplete  # only while a shell asks: it costs every other run nothing

    argcomplete.autocomplete(build_parser())


def _ledger_error() -> type[Exception]:
    """``LedgerError``, imported only once an exception is being matched (an ``except``
    clause's class is evaluated then), so a command that opens no ledger never loads the
    storage package."""
    from ..storage._models import LedgerError

    return LedgerError


def run() -> NoReturn:
    """The ``external-query`` program: ``main()`` on the command line, then exit with its
    code at once. Everything a command opened is closed when ``main`` returns and its output
    is flushed here; tearing down the interpreter's modules (about a tenth of a second for
    the text pipeline, pydantic and the segmenter's dictionary) would only delay a one-shot
    ``ask``. A command that ends with ``SystemExit`` (``--help``, ``--version``) exits the
    ordinary way."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a reader that went away, or a closed stream
        code = code or 1
    os._exit(code)
