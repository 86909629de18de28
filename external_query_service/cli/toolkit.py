"""``external-query check-task``, ``run-task`` and ``mcp``: evidence tasks and the MCP server.

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

from ..clock import fixed_clock, parse_now
from ..errors import InputError
from ..llm.client import ChatCompletionsClient
from ..service import ExternalQueryService
from ..settings import Settings
from ..toolkit.delegate import DelegationResult
from ..toolkit.errors import ToolkitError
from ..toolkit.operations import ToolkitSession
from ..toolkit.taskfile import load_inputs, load_task, resolve_inputs
from ..toolkit.tasks import EvidenceTask
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
    check = add_command(
        commands,
        "check-task",
        summary="validate a task file (and inputs) statically",
        description="Validate a task file, and with --inputs-json its runtime inputs, without "
        "any request.\nPrints the task (and the inputs' digest and categories) as JSON.",
        exit_codes=[
            (0, "valid: the summary (JSON) on stdout"),
            (2, "invalid: one line on stderr naming what is wrong"),
        ],
        examples=[
            "external-query check-task tasks/vendor.toml",
            "external-query check-task tasks/vendor.toml --inputs-json inputs.json",
        ],
    )
    check.add_argument("task", type=Path, help="task file (.toml or .json)")
    check.add_argument(
        "--inputs-json",
        type=Path,
        metavar="FILE",
        help="runtime inputs (JSON) to validate as well, including a free output name",
    )
    check.set_defaults(handler=_check_task)

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
            "external-query run-task tasks/vendor.toml --inputs-json inputs.json "
            "--config external-query.toml \\\n--goal 'Quote the supported Python versions' "
            "--max-steps 20 --archive steps.jsonl",
        ],
    )
    run.add_argument("task", type=Path, help="task file (.toml or .json)")
    run.add_argument(
        "--inputs-json", type=Path, required=True, metavar="FILE", help="runtime inputs (JSON)"
    )
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

    mcp = add_command(
        commands,
        "mcp",
        summary="serve the toolkit and the answer chain over MCP stdio",
        description="Serve the answer chain (and, with --task, the evidence toolkit) to one MCP "
        "client\nover stdio. Needs the extra: pip install 'external_query_service[mcp]'.",
        exit_codes=[
            (0, "the client closed the session"),
            (2, "bad input, or the MCP extra is not installed: one line on stderr"),
        ],
        examples=[
            "external-query mcp --config /path/to/external-query.toml",
            "external-query mcp --config /path/to/external-query.toml \\\n"
            "--task /path/to/task.toml --inputs-json /path/to/inputs.json --direct-only",
        ],
    )
    mcp.add_argument("--config", type=Path, metavar="FILE", help="settings file (TOML)")
    mcp.add_argument("--task", type=Path, metavar="FILE", help="task file for the toolkit tools")
    mcp.add_argument(
        "--inputs-json",
        type=Path,
        metavar="FILE",
        help="runtime inputs for --task (JSON); --task and --inputs-json go together",
    )
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


def _print(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _task(args: argparse.Namespace, settings: Settings) -> EvidenceTask:
    now = parse_now(args.now) if args.now is not None else None
    try:
        task = EvidenceTask.from_files(
            args.task,
            args.inputs_json,
            network=settings.network,
            clock=fixed_clock(now) if now else None,
        )
    except ToolkitError as exc:
        raise InputError(str(exc)) from None
    return task


def _check_task(args: argparse.Namespace) -> int:
    spec, task_dir = load_task(args.task)
    summary: dict[str, Any] = {"task": spec.model_dump(mode="json"), "valid": True}
    if args.inputs_json is not None:
        inputs, base_dir = load_inputs(args.inputs_json)
        resolved = resolve_inputs(spec, inputs, base_dir=base_dir)
        output = task_dir / spec.reports_dir / resolved.output
        if output.exists() or output.is_symlink():
            raise InputError(
                f"output {resolved.output} already exists; reports are never overwritten"
            )
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
    task = _task(args, settings)
    try:
        task.check_output_free()
        if policy == "model":
            assert settings.llm is not None
            result = asyncio.run(_delegate(args, task, ChatCompletionsClient(settings.llm)))
            return _delegated(task, result)
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


def _goal(task: EvidenceTask) -> str:
    """The default goal: the task's description, or backing every required category."""
    return task.spec.description or (
        f"Back every required category ({', '.join(task.required)}) with a recorded passage "
        "that holds its marker, then save the report."
    )


async def _delegate(
    args: argparse.Namespace, task: EvidenceTask, client: ChatCompletionsClient
) -> DelegationResult:
    session = ToolkitSession(task, model=client)
    try:
        return await session.delegate(
            args.goal if args.goal is not None else _goal(task),
            max_steps=args.max_steps,
            timeout_s=args.timeout,
            archive=args.archive,
        )
    finally:
        await session.aclose()


def _delegated(task: EvidenceTask, result: DelegationResult) -> int:
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
    from ..mcp_server import McpUnavailable, serve_stdio

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise McpUnavailable() from None
    if (args.task is None) != (args.inputs_json is None):
        raise InputError("--task and --inputs-json go together")
    settings = with_model(args, Settings.load(args.config) if args.config else Settings())
    now = parse_now(args.now) if args.now is not None else None
    task = _task(args, settings) if args.task is not None else None
    session = ToolkitSession(task, direct_only=args.direct_only)
    service = ExternalQueryService(
        settings, clock=fixed_clock(now) if now else None, store=session.store
    )
    # Delegation uses the service's own model client: one client per process.
    session.model = None if args.direct_only else service.llm
    asyncio.run(serve_stdio(session, service, archive=args.archive))
    return 0
