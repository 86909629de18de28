"""``external-query check-task``, ``run-task`` and ``mcp``: evidence tasks and the MCP server.

A task is a task file (``.toml``/``.json``) or a task script (``.py`` exporting
``workflow = TaskScript(build)``); its runtime inputs come inline (``--inputs '{…}'``,
relative paths against the current folder) or from a file (``--inputs-json FILE``,
relative paths against the file's folder). A script's ``build`` runs once, when the task is
first needed; ``check-task`` imports the script without calling it.

``run-task`` has two policies: ``walk`` collects breadth first without a model (today's
``collect``), ``model`` delegates the task to the configured model (``ToolkitSession.delegate``)
within ``--max-steps``, ``--timeout`` and the task's token budget. The default is ``model``
when a model is configured (``[llm]`` in ``--config``, or ``--llm-base-url``/``--llm-model``),
else ``walk``.

Exit codes: ``check-task`` 0 valid, 2 invalid (one line). ``run-task`` 0 when the report
is saved and every required category is backed by a verified quote, 3 when the report is
saved but some required category is not, 4 when a delegated run ended without a saved
report (the task's rules keep an incomplete one), 2 bad input (including an output file
that already exists). ``mcp`` serves one stdio session and exits 0 when the client closes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from .._clock import Clock, fixed_clock, parse_now
from .._jsonio import load_json_file
from ..errors import InputError, ToolkitError
from ..llm._client import ChatCompletionsClient
from ..service import ExternalQueryService
from ..settings import Settings
from ..toolkit._delegate import DelegationResult
from ..toolkit._operations import ToolkitSession
from ..toolkit._script import BoundScript, load_script, parse_inputs
from ..toolkit._taskfile import MAX_TASK_BYTES, TaskSpec, load_task, resolve_inputs, validate_inputs
from ..toolkit._tasks import EvidenceTask
from ._help import Subparsers, add_command
from ._model import add_model_flags, with_model

__all__ = ["EXIT_CHECKS_FAILED", "EXIT_NOT_SAVED", "register"]

#: ``run-task``: the report was saved, but a required category has no verified quote.
EXIT_CHECKS_FAILED = 3
#: ``run-task --policy model``: the run ended without a saved report.
EXIT_NOT_SAVED = 4
#: Flags that only a delegated run takes.
_MODEL_FLAGS = {
    "goal": "--goal",
    "max_steps": "--max-steps",
    "timeout": "--timeout",
    "archive": "--archive",
}


def register(commands: Subparsers) -> None:
    """Add the ``check-task``, ``run-task`` and ``mcp`` commands to ``commands``."""
    _register_check_task(commands)
    _register_run_task(commands)
    _register_mcp(commands)


def _register_check_task(commands: Subparsers) -> None:
    """``check-task``: a task validated without a request."""
    check = add_command(
        commands,
        "check-task",
        summary="validate a task file or script (and inputs) statically",
        description="Validate a task file, or import a task script without running its build, "
        "and\nwith --inputs or --inputs-json its runtime inputs, without any request.\nPrints "
        "the task (a script's inputs schema too, and the inputs' digest and categories)\nas "
        "JSON.",
        exit_codes=[
            (0, "valid: the summary (JSON) on stdout"),
            (2, "invalid: one line on stderr naming what is wrong"),
        ],
        examples=[
            "external-query check-task tasks/vendor.toml",
            "external-query check-task tasks/vendor.toml --inputs-json inputs.json",
            "external-query check-task examples/research_task.py",
        ],
    )
    check.add_argument("task", type=Path, help=_TASK_HELP)
    _add_inputs_flags(check, "to validate as well, including a free output name")
    check.set_defaults(handler=_check_task)


def _register_run_task(commands: Subparsers) -> None:
    """``run-task``: a task's evidence collected (by a model, or a walk) and its report saved."""
    run = add_command(
        commands,
        "run-task",
        summary="collect evidence for a task (by a model, or a walk) and save its report",
        description="Collect evidence for a task over the network, save its report under the "
        "task's\nreports folder (never overwriting one), and print the receipt and checks as "
        "JSON.\n\nWith a model configured ([llm] in --config, or --llm-base-url and "
        "--llm-model) the task is\ndelegated: the model chooses each step from the options on "
        "offer, within --max-steps,\n--timeout and the task's token budget. --policy walk "
        "collects breadth first instead,\nwithout a model.",
        exit_codes=[
            (0, "the report is saved and every required category has a verified quote"),
            (2, "bad input (also an output file that already exists): one line on stderr"),
            (EXIT_CHECKS_FAILED, "the report is saved, but some required category is not backed"),
            (
                EXIT_NOT_SAVED,
                "a delegated run ended without a saved report (the task keeps incomplete ones\n"
                "unsaved); its status and reason are in the output",
            ),
        ],
        examples=[
            "external-query run-task tasks/vendor.toml --inputs-json inputs.json --policy walk",
            "external-query run-task examples/research_task.py --goal 'Quote the requirements' "
            '\\\n--inputs \'{"url": "https://docs.example.org/", "allowed_origins": '
            '["https://docs.example.org"],\n"markers": {"requirements": "Python 3.11"}, '
            '"output": "local-results/research.json"}\'',
            "external-query run-task tasks/vendor.toml --inputs-json inputs.json "
            "--config external-query.toml \\\n--goal 'Quote the supported Python versions' "
            "--max-steps 20 --archive steps.jsonl",
        ],
    )
    run.add_argument("task", type=Path, help=_TASK_HELP)
    _add_inputs_flags(run, "(one of the two is required)")
    run.add_argument(
        "--config", type=Path, metavar="FILE", help="settings file (TOML): network policy, [llm]"
    )
    run.add_argument(
        "--now", metavar="ISO", help="the clock for created_at: ISO datetime with an offset"
    )
    run.add_argument(
        "--policy",
        choices=["walk", "model"],
        help="model: delegate to the configured model (the default when one is configured); "
        "walk: follow links breadth first (or run the queries), no model",
    )
    run.add_argument(
        "--goal",
        metavar="TEXT",
        help="what the delegated run is for (default: the task's description, or backing "
        "every required category)",
    )
    run.add_argument(
        "--max-steps",
        type=int,
        metavar="N",
        help="operations the model may choose (default: the task's [delegation] max_steps)",
    )
    run.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="seconds the delegated run may take (default: the task's [delegation] timeout_s)",
    )
    run.add_argument(
        "--archive",
        type=Path,
        metavar="FILE",
        help="append one JSON line per delegated step to FILE (never the API key)",
    )
    add_model_flags(run)
    run.set_defaults(handler=_run_task)


def _register_mcp(commands: Subparsers) -> None:
    """``mcp``: the toolkit and the answer chain served over MCP stdio."""
    mcp = add_command(
        commands,
        "mcp",
        summary="serve the toolkit and the answer chain over MCP stdio",
        description="Serve the answer chain to one MCP client over stdio: answer and "
        "read_evidence,\nand observe, arguments and operate over the evidence tools (reading "
        "the captures\nanswers make); with --task, that task's tools as well, and run_task "
        "where a model\nis configured. Needs the extra: pip install "
        "'external_query_service[mcp]'.",
        exit_codes=[
            (0, "the client closed the session"),
            (2, "bad input, or the MCP extra is not installed: one line on stderr"),
        ],
        examples=[
            "external-query mcp --config /path/to/external-query.toml",
            "external-query mcp --docs /path/to/docs",
            "external-query mcp --config /path/to/external-query.toml \\\n"
            "--task /path/to/task.toml --inputs-json /path/to/inputs.json --direct-only",
        ],
    )
    mcp.add_argument("--config", type=Path, metavar="FILE", help="settings file (TOML)")
    mcp.add_argument(
        "--docs", type=Path, metavar="DIR", help="add a local_docs adapter over DIR (as ask does)"
    )
    mcp.add_argument(
        "--task", type=Path, metavar="FILE", help="task file or script for the toolkit tools"
    )
    _add_inputs_flags(mcp, "for --task (--task needs one of the two)")
    mcp.add_argument(
        "--now", metavar="ISO", help="the clock for time checks: ISO datetime with an offset"
    )
    mcp.add_argument(
        "--direct-only",
        action="store_true",
        help="offer direct operation only: no run_task (delegation) tool",
    )
    mcp.add_argument(
        "--archive",
        type=Path,
        metavar="FILE",
        help="append one JSON line per step of a run_task delegation to FILE",
    )
    add_model_flags(mcp)
    mcp.set_defaults(handler=_serve_mcp)


_TASK_HELP = "task file (.toml or .json) or task script (.py exporting workflow)"


def _add_inputs_flags(parser: argparse.ArgumentParser, purpose: str) -> None:
    parser.add_argument(
        "--inputs",
        metavar="JSON",
        help=f"runtime inputs as one JSON object {purpose}; relative paths against the "
        "current folder",
    )
    parser.add_argument(
        "--inputs-json",
        type=Path,
        metavar="FILE",
        help=f"runtime inputs from a JSON file {purpose}; relative paths against its folder",
    )


def _given_inputs(args: argparse.Namespace) -> tuple[dict[str, Any], Path] | None:
    """The runtime inputs the flags give, and the folder relative paths resolve against."""
    if args.inputs is not None and args.inputs_json is not None:
        raise InputError("--inputs and --inputs-json: give the inputs one way")
    if args.inputs is not None:
        return parse_inputs(args.inputs), Path.cwd()
    if args.inputs_json is not None:
        data = load_json_file(args.inputs_json, max_bytes=MAX_TASK_BYTES)
        if not isinstance(data, dict):
            raise InputError(f"{args.inputs_json}: the root must be an object")
        return data, args.inputs_json.resolve().parent
    return None


def _is_script(path: Path) -> bool:
    return path.suffix.lower() == ".py"


def _clock(args: argparse.Namespace) -> Clock | None:
    now = parse_now(args.now) if args.now is not None else None
    return fixed_clock(now) if now else None


def _prepare(args: argparse.Namespace, settings: Settings) -> EvidenceTask | BoundScript:
    """The task the flags name: a task file's task, or a script bound to checked inputs
    (its build not called yet)."""
    given = _given_inputs(args)
    if given is None:
        raise InputError("the runtime inputs are missing: --inputs JSON or --inputs-json FILE")
    data, base_dir = given
    clock = _clock(args)
    if _is_script(args.task):
        return load_script(args.task).bind(
            data, base_dir=base_dir, network=settings.network, clock=clock
        )
    spec, task_dir = load_task(args.task)
    try:
        return EvidenceTask(
            spec, data, task_dir=task_dir, base_dir=base_dir, network=settings.network, clock=clock
        )
    except ToolkitError as exc:
        raise InputError(str(exc)) from None


def _session(
    prepared: EvidenceTask | BoundScript,
    *,
    model: ChatCompletionsClient | None = None,
    direct_only: bool = False,
) -> ToolkitSession:
    if isinstance(prepared, BoundScript):
        return prepared.session(model=model, direct_only=direct_only)
    return ToolkitSession(prepared, model=model, direct_only=direct_only)


def _print(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _check_task(args: argparse.Namespace) -> int:
    given = _given_inputs(args)
    summary: dict[str, Any]
    if _is_script(args.task):
        script = load_script(args.task)
        spec = script.spec
        summary = {
            "script": str(args.task),
            "task": spec.model_dump(mode="json"),
            "inputs_schema": script.inputs_schema(),
            "valid": True,
        }
        if given is not None:
            script.bind(given[0], base_dir=given[1])  # checks, never builds
    else:
        spec, task_dir = load_task(args.task)
        summary = {"task": spec.model_dump(mode="json"), "valid": True}
        if given is not None:
            resolved = resolve_inputs(spec, validate_inputs(given[0]), base_dir=given[1])
            output = task_dir / spec.reports_dir / resolved.output
            if output.exists() or output.is_symlink():
                raise InputError(
                    f"output {resolved.output} already exists; reports are never overwritten"
                )
    if given is not None:
        inputs = validate_inputs(given[0])
        summary["inputs_digest"] = inputs.digest
        summary["categories"] = sorted(inputs.markers)
        summary["required"] = list(spec.required or inputs.markers)
    _print(summary)
    return 0


def _run_task(args: argparse.Namespace) -> int:
    settings = with_model(args, Settings.load(args.config) if args.config else Settings())
    policy = args.policy or ("model" if settings.llm is not None else "walk")
    given = [flag for name, flag in _MODEL_FLAGS.items() if getattr(args, name) is not None]
    if policy == "walk" and given:
        raise InputError(f"{', '.join(given)}: only a delegated run (--policy model) takes these")
    if policy == "model" and settings.llm is None:
        raise InputError(
            "--policy model needs a model: an [llm] section in --config, or --llm-base-url "
            "and --llm-model"
        )
    prepared = _prepare(args, settings)
    try:
        if isinstance(prepared, EvidenceTask):
            prepared.check_output_free()
        if policy == "model":
            assert settings.llm is not None
            session = _session(prepared, model=ChatCompletionsClient(settings.llm))
            spec = prepared.script.spec if isinstance(prepared, BoundScript) else prepared.spec
            markers = _markers(prepared)
            result = asyncio.run(_delegate(args, session, _goal(spec, markers)))
            return _delegated(result)
        task = prepared.task() if isinstance(prepared, BoundScript) else prepared
        summary = asyncio.run(_collect(task))
        # An existing output, a symlinked reports folder or an unwritable one: bad input.
        receipt = task.save()
    except ToolkitError as exc:
        raise InputError(str(exc)) from None
    checks = task.checks()
    _print(
        {
            "receipt": receipt.model_dump(mode="json"),
            "checks": [check.model_dump(mode="json") for check in checks],
            "collection": summary.model_dump(mode="json"),
        }
    )
    return 0 if all(check.passed for check in checks) else EXIT_CHECKS_FAILED


def _markers(prepared: EvidenceTask | BoundScript) -> tuple[str, ...]:
    if isinstance(prepared, BoundScript):
        return tuple(prepared.inputs.task_inputs.markers)
    return tuple(prepared.inputs.markers)


def _goal(spec: TaskSpec, markers: tuple[str, ...]) -> str:
    """The default goal: the task's description, or backing every required category."""
    return spec.description or (
        f"Back every required category ({', '.join(spec.required or markers)}) with a "
        "recorded passage that holds its marker, then save the report."
    )


async def _delegate(
    args: argparse.Namespace, session: ToolkitSession, goal: str
) -> DelegationResult:
    try:
        return await session.delegate(
            args.goal if args.goal is not None else goal,
            max_steps=args.max_steps,
            timeout_s=args.timeout,
            archive=args.archive,
        )
    finally:
        await session.aclose()


def _delegated(result: DelegationResult) -> int:
    _print(
        {
            "receipt": result.receipt.model_dump(mode="json"),
            "checks": [check.model_dump(mode="json") for check in result.checks],
            "delegation": result.model_dump(mode="json", exclude={"receipt", "checks"}),
        }
    )
    if not result.report_saved:
        return EXIT_NOT_SAVED
    return 0 if result.status == "completed" else EXIT_CHECKS_FAILED


async def _collect(task: EvidenceTask) -> Any:
    try:
        return await task.collect()
    finally:
        await task.aclose()


def _serve_mcp(args: argparse.Namespace) -> int:
    # Import before anything else so a missing SDK fails fast, with the install hint.
    from ..server.mcp import McpUnavailable, serve_stdio

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise McpUnavailable() from None
    has_inputs = args.inputs is not None or args.inputs_json is not None
    if (args.task is None) == has_inputs:
        raise InputError("--task and its inputs (--inputs or --inputs-json) go together")
    settings = with_model(args, Settings.load(args.config) if args.config else Settings())
    if args.docs is not None:
        if not args.docs.is_dir():
            raise InputError(f"--docs: not a folder: {args.docs}")
        settings = settings.with_docs(args.docs)
    session = (
        _session(_prepare(args, settings), direct_only=args.direct_only)
        if args.task is not None
        else ToolkitSession(direct_only=args.direct_only)
    )
    service = ExternalQueryService(settings, clock=_clock(args), store=session.store)
    # Delegation uses the service's own model client: one client per process.
    session.model = None if args.direct_only else service.llm
    asyncio.run(serve_stdio(session, service, archive=args.archive))
    return 0
