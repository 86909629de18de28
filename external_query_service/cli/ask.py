"""``external-query ask``: answer one question from external evidence."""

from __future__ import annotations

import argparse
import contextlib
import sys
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._audit import AuditEvent, listening
from .._clock import fixed_clock, parse_now
from .._jsonio import load_json_file, read_regular_file
from ..errors import InputError
from ..models import ExternalAnswer
from ..observability._progress import describe, progress_event
from ..service import MAX_QUESTION_CHARS, ExternalQueryService, coerce_semantics
from ..settings import Settings
from . import PROG
from ._help import Subparsers, add_command
from ._model import add_model_flags, with_model
from ._plain import plain_text
from ._sources import EXIT_UNREACHABLE, script_page_hint, unreachable_sources

if TYPE_CHECKING:
    from ..adapters._page_walk import RecordedWalks

__all__ = ["no_data_source", "register"]


_DESCRIPTION = """\
Answer one question from external evidence only: live search, fact APIs or local documents.

What the question is about comes from flags (or --semantics-json, the host's query_semantics),
never from guessing at its words. Without a kind, the question is planned as a general web
search, which needs a searxng adapter in --config."""


def register(commands: Subparsers) -> None:
    """Add the ``ask`` command to ``commands``."""
    ask = add_command(
        commands,
        "ask",
        summary="answer one question from external evidence",
        description=_DESCRIPTION,
        exit_codes=[
            (0, "an outcome: answered, insufficient_evidence or clarify (see the footer)"),
            (2, "bad input: a flag, file, question or settings problem (one line on stderr)"),
            (
                3,
                "no source could be reached: every one tried refused the connection or\n"
                "answered 404 (a wrong base_url or port); the answer is printed, and one\n"
                "line on stderr names each URL",
            ),
            (1, "an internal failure"),
        ],
        examples=[
            'external-query ask "What does the verifier check?" --docs docs/architecture',
            'external-query ask "湛江明天天气怎么样？" --config external-query.toml \\\n'
            "--kind weather --location 湛江 --since 2026-12-01 --until 2026-12-01",
        ],
    )
    _add_question_flags(ask)
    _add_run_flags(ask)
    ask.set_defaults(handler=_run)


def _add_question_flags(ask: argparse.ArgumentParser) -> None:
    """The question, the settings, and what the question is about (its semantics)."""
    ask.add_argument(
        "question",
        nargs="?",
        help=f"the question (at most {MAX_QUESTION_CHARS:,} characters); '-' reads it from stdin",
    )
    ask.add_argument(
        "--question-file",
        type=Path,
        metavar="FILE",
        help="read the question from FILE (UTF-8) instead; '-' is stdin",
    )
    ask.add_argument("--config", type=Path, metavar="FILE", help="settings file (TOML)")
    ask.add_argument(
        "--semantics-json",
        type=Path,
        metavar="FILE",
        help="the host's query_semantics as a JSON object; flags below override its fields",
    )
    ask.add_argument(
        "--kind",
        help="query kind: weather, exchange_rate, stock_quote, news, generic_web, "
        "documentation, or one a configured adapter declares",
    )
    ask.add_argument("--location", help="the place a weather question is about (e.g. 湛江)")
    ask.add_argument(
        "--entity",
        action="append",
        default=[],
        help="an entity the question is about; repeatable (exchange rates: base currency first)",
    )
    ask.add_argument(
        "--compare", action="append", default=[], help="a target to compare; repeatable"
    )
    ask.add_argument("--since", metavar="DATE", help="time range start (YYYY-MM-DD)")
    ask.add_argument("--until", metavar="DATE", help="time range end (YYYY-MM-DD)")
    ask.add_argument(
        "--contract",
        choices=["direct_fact", "summary_with_sources", "compare_with_sources"],
        help="the answer's shape (default: chosen from the kind and compare targets)",
    )


def _add_run_flags(ask: argparse.ArgumentParser) -> None:
    """Where the evidence comes from (local documents, a recorded world), the clock, the
    model, and how the answer and its progress are printed."""
    ask.add_argument(
        "--docs",
        type=Path,
        metavar="DIR",
        help="add a local_docs adapter over DIR; the kind is documentation unless --kind says",
    )
    ask.add_argument(
        "--now", metavar="ISO", help="the clock for time checks: an ISO datetime with an offset"
    )
    add_model_flags(ask)
    ask.add_argument(
        "--format",
        choices=["text", "markdown", "json", "bundle"],
        default="text",
        help="text: the answer as a terminal shows it, and a status footer (default); "
        "markdown: the same as Markdown (outside text escaped); json: the whole answer model; "
        "bundle: the answer bundle that `external-query verify` checks",
    )
    ask.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print the plan, each adapter attempt and the verdict on stderr as they happen "
        "(default: when stderr is a terminal)",
    )
    ask.add_argument(
        "--world",
        type=Path,
        metavar="DIR",
        help="replay a recorded world folder on loopback (its settings and clock)",
    )


def _iso_date(value: str, flag: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InputError(f"{flag}: not a date (YYYY-MM-DD): {value!r}") from None


def _semantics(args: argparse.Namespace, today: date) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if args.semantics_json is not None:
        loaded = load_json_file(args.semantics_json)
        if not isinstance(loaded, dict):
            raise InputError(f"{args.semantics_json}: the root must be a JSON object")
        fields.update(loaded)
    if args.kind:
        fields["query_kind"] = args.kind
    if args.location:
        fields["location"] = args.location
    if args.entity:
        fields["entities"] = args.entity
    if args.compare:
        fields["compare_targets"] = args.compare
    if args.contract:
        fields["answer_contract"] = args.contract
    if args.docs is not None and not fields.get("query_kind"):
        fields["query_kind"] = "documentation"  # --docs names the source; --kind may still say
    if args.since or args.until:
        # One bound alone: --since runs to today (or stays one day), --until is one day.
        start = _iso_date(args.since, "--since") if args.since else None
        end = _iso_date(args.until, "--until") if args.until else None
        if start is None:
            start = end
        if end is None:
            end = max(start, today) if start else None
        fields["time_range"] = {"start": start, "end": end}
    return fields


# A question file or stdin is read up to this many bytes; the length rule itself is the
# service's (MAX_QUESTION_CHARS), so its message is the same whichever way a question came.
_MAX_QUESTION_BYTES = 1 << 20


def _question(args: argparse.Namespace) -> str:
    """The question from the argument, ``--question-file`` or stdin (``-``)."""
    if args.question is not None and args.question_file is not None:
        raise InputError("give the question as an argument or with --question-file, not both")
    if args.question_file is not None and str(args.question_file) != "-":
        try:
            data = read_regular_file(args.question_file, max_bytes=_MAX_QUESTION_BYTES)
        except InputError as exc:
            raise InputError(f"--question-file: {exc}") from None
        origin = str(args.question_file)
    elif args.question_file is not None or args.question == "-":
        data = sys.stdin.buffer.read(_MAX_QUESTION_BYTES + 1)
        if len(data) > _MAX_QUESTION_BYTES:
            raise InputError(f"the question on stdin is larger than {_MAX_QUESTION_BYTES} bytes")
        origin = "stdin"
    elif args.question is None:
        raise InputError("no question: give it as an argument, '-' for stdin, or --question-file")
    else:
        question: str = args.question
        return question
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"the question from {origin} is not UTF-8 text") from None


def _settings(args: argparse.Namespace, base: Settings | None = None) -> Settings:
    settings = base or (Settings.load(args.config) if args.config else Settings())
    if args.docs is not None:
        if not args.docs.is_dir():
            raise InputError(f"--docs: not a folder: {args.docs}")
        settings = settings.with_docs(args.docs)
    return with_model(args, settings)


def _markdown(answer: ExternalAnswer, *, plain: bool = False) -> str:
    planner: str = answer.plan.planner_source
    render = answer.audit.named("render")
    renderer = render[-1].detail.get("renderer") if render else "?"
    fallback = render[-1].detail.get("fallback_reason") if render else None
    if fallback:
        renderer = f"{renderer} (llm fallback: {fallback})"
    planned = answer.audit.named("plan")
    why = planned[-1].detail.get("fallback_reason") if planned else None
    if why and why != "no structured planner":
        planner = f"{planner} ({why})"
    status = answer.status + (f" ({answer.reason})" if answer.reason else "")
    footer = (
        f"> status: {status} · contract: {answer.answer_contract} · "
        f"planner: {planner} · presenter: {renderer}"
    )
    text = plain_text(answer.text) if plain else answer.text
    return f"{text.rstrip()}\n\n{footer}\n"


def _run(args: argparse.Namespace) -> int:
    question = _question(args)
    if args.world is not None:
        return _replay(args, question)
    return _answer(args, question, _settings(args), parse_now(args.now) if args.now else None)


def _replay(args: argparse.Namespace, question: str) -> int:
    """``--world``: serve the world on loopback and answer there, on its settings and clock
    (``--now`` still wins)."""
    if args.config is not None:
        raise InputError("--world brings its own settings; drop --config")
    from ..testing.world import open_world  # only a replay needs the world server

    with open_world(args.world) as world:
        now = parse_now(args.now) if args.now else world.now
        # The recorded question replays with its recorded semantics unless flags say otherwise.
        recorded = world.spec.recorded_semantics(question) if world.spec else None
        settings = _settings(args, world.settings())
        walks = world.recorded_walks()
        return _answer(args, question, settings, now, default=recorded, recorded_walks=walks)


def no_data_source() -> InputError:
    """The input error for settings with no enabled adapter, listing every kind the adapter
    registry knows (built-ins and plugins alike), so the list never falls behind it."""
    from ..gateway._registry import known_kinds  # only this error needs the registry

    return InputError(
        "no data source is configured: pass --config FILE with [[adapters]] "
        f"({', '.join(known_kinds())}), or --docs DIR for a local folder"
    )


def _progress(wanted: bool | None) -> contextlib.AbstractContextManager[None]:
    """Progress lines on stderr while the question is answered, when ``wanted`` (None:
    when stderr is a terminal)."""
    if not (sys.stderr.isatty() if wanted is None else wanted):
        return contextlib.nullcontext()

    def show(event: AuditEvent) -> None:
        found = progress_event(event)
        if found is not None:
            sys.stderr.write(describe(found) + "\n")
            sys.stderr.flush()

    return listening(show)


def _answer(
    args: argparse.Namespace,
    question: str,
    settings: Settings,
    now: datetime | None,
    *,
    default: dict[str, Any] | None = None,
    recorded_walks: RecordedWalks | None = None,
) -> int:
    today = (now or datetime.now().astimezone()).date()
    semantics = coerce_semantics(_semantics(args, today) or default or None)
    if not any(adapter.enabled for adapter in settings.adapters):
        raise no_data_source()
    clock = fixed_clock(now) if now else None
    service = ExternalQueryService(settings, clock=clock, recorded_walks=recorded_walks)
    with service, _progress(args.progress):
        answer = service.answer(question, semantics)
    if args.format == "json":
        sys.stdout.write(answer.model_dump_json(indent=2) + "\n")
    elif args.format == "bundle":
        sys.stdout.write(answer.bundle(settings=settings) + "\n")
    else:
        sys.stdout.write(_markdown(answer, plain=args.format == "text"))
    for line in script_page_hint(answer, settings):
        print(f"{PROG}: hint: {line}", file=sys.stderr)
    unreached = unreachable_sources(answer, settings)
    for line in unreached:
        print(f"{PROG}: error: {line}", file=sys.stderr)
    return EXIT_UNREACHABLE if unreached else 0
