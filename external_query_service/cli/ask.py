"""``external-query ask``: answer one question from external evidence."""

from __future__ import annotations

import argparse
import sys
from datetime import date, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..clock import fixed_clock
from ..errors import InputError
from ..jsonio import load_json_file
from ..models import ExternalAnswer
from ..service import ExternalQueryService, coerce_semantics
from ..settings import LLMSettings, Settings, format_validation_error

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ask = commands.add_parser("ask", help="answer one question from external evidence")
    ask.add_argument("question")
    ask.add_argument("--config", type=Path, help="settings file (TOML)")
    ask.add_argument("--semantics-json", type=Path, help="query_semantics as a JSON file")
    ask.add_argument("--kind", help="query kind (weather, exchange_rate, news, documentation, ...)")
    ask.add_argument("--location")
    ask.add_argument("--entity", action="append", default=[], help="repeatable")
    ask.add_argument("--compare", action="append", default=[], help="compare target; repeatable")
    ask.add_argument("--since", help="time range start (YYYY-MM-DD)")
    ask.add_argument("--until", help="time range end (YYYY-MM-DD)")
    ask.add_argument(
        "--contract", choices=["direct_fact", "summary_with_sources", "compare_with_sources"]
    )
    ask.add_argument("--docs", type=Path, help="add a local_docs adapter over this folder")
    ask.add_argument("--now", help="the clock for time checks: ISO datetime with an offset")
    ask.add_argument("--llm-base-url", help="OpenAI-compatible endpoint (overrides [llm])")
    ask.add_argument("--llm-model", help="model name (overrides [llm])")
    ask.add_argument("--format", choices=["markdown", "json"], default="markdown")
    ask.add_argument(
        "--world", type=Path, help="replay a world folder on loopback (its settings and clock)"
    )
    ask.set_defaults(handler=run)


def _iso_date(value: str, flag: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InputError(f"{flag}: not a date (YYYY-MM-DD): {value!r}") from None


def _now(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"--now: not an ISO datetime: {value!r}") from None
    if moment.utcoffset() is None:
        raise InputError(f"--now needs an offset (e.g. {value}+08:00)")
    return moment


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


def _settings(args: argparse.Namespace, base: Settings | None = None) -> Settings:
    settings = base or (Settings.load(args.config) if args.config else Settings())
    if args.docs is not None:
        if not args.docs.is_dir():
            raise InputError(f"--docs: not a folder: {args.docs}")
        settings = settings.with_docs(args.docs)
    if args.llm_base_url or args.llm_model:
        fields = settings.llm.model_dump() if settings.llm else {}
        if args.llm_base_url:
            fields["base_url"] = args.llm_base_url
        if args.llm_model:
            fields["model"] = args.llm_model
        try:
            llm = LLMSettings.model_validate(fields)
        except ValidationError as exc:
            raise InputError(f"--llm-*: {format_validation_error(exc)}") from None
        settings = settings.model_copy(update={"llm": llm})
    return settings


def _markdown(answer: ExternalAnswer) -> str:
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
    return f"{answer.text.rstrip()}\n\n{footer}\n"


def run(args: argparse.Namespace) -> int:
    if args.world is not None:
        return _replay(args)
    return _answer(args, _settings(args), _now(args.now) if args.now else None)


def _replay(args: argparse.Namespace) -> int:
    """``--world``: serve the world on loopback and answer there, on its settings and clock
    (``--now`` still wins)."""
    if args.config is not None:
        raise InputError("--world brings its own settings; drop --config")
    from ..testing.world import open_world  # only a replay needs the world server

    with open_world(args.world) as world:
        now = _now(args.now) if args.now else world.now
        # The recorded question replays with its recorded semantics unless flags say otherwise.
        recorded = world.spec.recorded_semantics(args.question) if world.spec else None
        return _answer(args, _settings(args, world.settings()), now, default=recorded)


def _answer(
    args: argparse.Namespace,
    settings: Settings,
    now: datetime | None,
    *,
    default: dict[str, Any] | None = None,
) -> int:
    today = (now or datetime.now().astimezone()).date()
    semantics = coerce_semantics(_semantics(args, today) or default or None)
    clock = fixed_clock(now) if now else None
    with ExternalQueryService(settings, clock=clock) as service:
        answer = service.answer(args.question, semantics)
    if args.format == "json":
        sys.stdout.write(answer.model_dump_json(indent=2) + "\n")
    else:
        sys.stdout.write(_markdown(answer))
    return 0
