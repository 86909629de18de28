"""``external-query ledger show PLAN_ID``: the answer runs the ledger holds for one plan.

A bundle (``docs/architecture/bundles.md``) names its plan ids; this finds each in the
ledger: the plan as stored and every answer run that bound it, with how many of the run's
receipts and admissions are held. Registered by ``evidence.py`` beside the other ledger
steps, whose guard, ledger choice and output it shares (passed in, so neither module imports
the other's internals).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from .._canonical import is_digest
from ..admission import render
from ..errors import InputError
from ..storage import LedgerTarget, open_ledger
from . import PROG
from ._help import EXIT_INPUT, Subparsers, add_command

__all__ = ["EXIT_NOT_HELD", "add_show_step"]

#: The ledger holds no plan with that id: one line on stderr.
EXIT_NOT_HELD = 3
_Handler = Callable[[argparse.Namespace], int]


def add_show_step(
    steps: Subparsers,
    common: argparse.ArgumentParser,
    *,
    guarded: Callable[[_Handler], _Handler],
    target: Callable[[argparse.Namespace], LedgerTarget],
) -> None:
    """Add ``ledger show`` to the ledger's ``steps``: ``guarded`` renders the contract's
    errors as the other steps do, ``target`` picks the ledger from the flags."""
    show = add_command(
        steps,
        "show",
        parents=[common],
        summary="show the answer runs the ledger holds for a plan id (a bundle's)",
        description="Find PLAN_ID (an answer's admission.plan_ids entry, or a bundle's) in "
        "the ledger: the plan\nas stored, and every answer run that bound it with its request "
        "id, plan ids, receipt\ndigests and admission ids, and how many of those the ledger "
        "holds. Reads only.",
        exit_codes=[
            (0, "found: the plan and its runs on stdout"),
            EXIT_INPUT,
            (EXIT_NOT_HELD, "the ledger holds no plan with this id: one line on stderr"),
        ],
        examples=[
            "external-query ledger show sha256:6c29d6ec… --config external-query.toml",
            "external-query ledger show sha256:6c29d6ec… --ledger research.sqlite3 --format json",
        ],
    )
    show.add_argument("plan_id", metavar="PLAN_ID", help="sha256:<64 hex digits>")
    show.set_defaults(handler=guarded(lambda args: _run(args, target(args))))


def _run(args: argparse.Namespace, target: LedgerTarget) -> int:
    if not is_digest(args.plan_id):
        raise InputError(f"PLAN_ID must be sha256:<64 lowercase hex>, not {args.plan_id!r}")
    with open_ledger(target, create=False) as ledger:
        run = ledger.run_of(args.plan_id)
    if run is None:
        sys.stderr.write(f"{PROG}: ledger show: the ledger holds no plan {args.plan_id}\n")
        return EXIT_NOT_HELD
    sys.stdout.write(render(run, args.format))
    return 0
