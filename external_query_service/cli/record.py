"""``external-query record``: answer one question against real providers and keep the world.

Writes every adapter response and fetched page (bounded, with digests) to a new folder
that ``ask --world`` and regression cases replay. Secrets never reach disk.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from ..errors import InputError
from ..jsonio import load_json_file
from ..service import coerce_semantics
from ..settings import Settings
from ..testing.recorder import record_world
from ..testing.world_files import MAX_WORLD_BYTES

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    record = commands.add_parser(
        "record", help="answer against real providers and write what they said as a world"
    )
    record.add_argument("question")
    record.add_argument("--config", type=Path, required=True, help="live settings file (TOML)")
    record.add_argument("--out", type=Path, required=True, help="new or empty folder to write")
    record.add_argument("--semantics-json", type=Path, help="query_semantics as a JSON file")
    record.add_argument("--now", help="the clock for the run: ISO datetime with an offset")
    record.add_argument(
        "--max-bytes", type=int, default=MAX_WORLD_BYTES, help="cap on all recorded bodies"
    )
    record.set_defaults(handler=run)


def _now(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"--now: not an ISO datetime: {value!r}") from None
    if moment.utcoffset() is None:
        raise InputError(f"--now needs an offset (e.g. {value}+08:00)")
    return moment


def run(args: argparse.Namespace) -> int:
    settings = Settings.load(args.config)
    semantics = None
    if args.semantics_json is not None:
        loaded = load_json_file(args.semantics_json)
        if not isinstance(loaded, dict):
            raise InputError(f"{args.semantics_json}: the root must be a JSON object")
        semantics = coerce_semantics(loaded)
    now = _now(args.now) if args.now else None
    result = record_world(
        args.question, semantics, settings, args.out, now=now, max_bytes=args.max_bytes
    )
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
