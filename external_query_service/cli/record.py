"""``external-query record``: answer one question against real providers and keep the world.

Writes every adapter response and fetched page (bounded, with digests) to a new folder
that ``ask --world`` and regression cases replay. Secrets never reach disk. A run in which
no provider answered is not saved (exit 3) unless ``--allow-failed``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._clock import parse_now
from .._jsonio import load_json_file
from ..errors import InputError
from ..service import coerce_semantics
from ..settings import Settings
from ..testing._recorder import NothingAnswered, record_world
from ..testing.world_files import MAX_WORLD_BYTES
from . import PROG
from ._help import EXIT_INPUT, Subparsers, add_command

__all__ = ["EXIT_NOTHING_ANSWERED", "register"]

#: No provider answered: nothing was written.
EXIT_NOTHING_ANSWERED = 3


def register(commands: Subparsers) -> None:
    """Add the ``record`` command to ``commands``."""
    record = add_command(
        commands,
        "record",
        summary="answer against real providers and write what they said as a world",
        description="Answer QUESTION against the providers in --config, recording every "
        "response,\nand write them as a world folder that `ask --world` and eval cases replay "
        "offline.",
        exit_codes=[
            (0, "the world is written (its folder and the answer's status on stdout)"),
            EXIT_INPUT,
            (
                EXIT_NOTHING_ANSWERED,
                "no provider answered (every request failed): nothing written, one line on stderr",
            ),
        ],
        examples=[
            'external-query record "Tokyo weather tomorrow?" --config live.toml --out worlds/tokyo',
            'external-query record "湛江港今年吞吐量是多少？" --config live.toml --out worlds/port '
            "\\\n--semantics-json semantics.json --now 2026-11-30T10:00:00+08:00",
        ],
    )
    record.add_argument("question", help="the question to answer and record")
    record.add_argument(
        "--config",
        type=Path,
        required=True,
        metavar="FILE",
        help="live settings file (TOML): the providers to record",
    )
    record.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="new or empty folder to write the world into",
    )
    record.add_argument(
        "--semantics-json", type=Path, metavar="FILE", help="query_semantics as a JSON file"
    )
    record.add_argument(
        "--now", metavar="ISO", help="the clock for the run: ISO datetime with an offset"
    )
    record.add_argument(
        "--max-bytes",
        type=int,
        default=MAX_WORLD_BYTES,
        metavar="N",
        help=f"cap on all recorded bodies together (default {MAX_WORLD_BYTES})",
    )
    record.add_argument(
        "--allow-failed",
        action="store_true",
        help="write the world even when no provider answered (to replay that failure)",
    )
    record.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    settings = Settings.load(args.config)
    semantics = None
    if args.semantics_json is not None:
        loaded = load_json_file(args.semantics_json)
        if not isinstance(loaded, dict):
            raise InputError(f"{args.semantics_json}: the root must be a JSON object")
        semantics = coerce_semantics(loaded)
    now = parse_now(args.now) if args.now else None
    try:
        result = record_world(
            args.question,
            semantics,
            settings,
            args.out,
            now=now,
            max_bytes=args.max_bytes,
            allow_failed=args.allow_failed,
        )
    except NothingAnswered as exc:
        sys.stderr.write(
            f"{PROG}: record: {exc}; no world written (--allow-failed writes it anyway)\n"
        )
        return EXIT_NOTHING_ANSWERED
    answer = result.answer
    status = answer.status + (f" ({answer.reason})" if answer.reason else "")
    sys.stdout.write(
        f"recorded {result.exchanges} exchanges ({result.bytes} bytes) to {result.directory}\n"
        f"answer: {status} · {len(answer.sources)} sources\n"
    )
    if result.scrubbed:
        # Not an error: the secret stays off disk, and the user learns why digests differ.
        sys.stderr.write(
            f"note: secrets scrubbed from {', '.join(result.scrubbed)}; evidence drawn from "
            "these bodies replays with a different raw_digest\n"
        )
    return 0
