"""``external-query evidence …`` and ``external-query ledger start``: the admission
contract on the command line (parse, call the contract, print).

JSON inputs are file paths, never inline JSON. Every command takes ``--ledger PATH``
(default: the ``--config`` file's ``[ledger] path``, else ``ledger.sqlite3`` under the
user's data folder), ``--format json|markdown`` (markdown by default) and ``--config``
(its ``[github]`` endpoints and ``[network]`` policy serve ``method:public-github``).
JSON output is the record itself, so a saved ``plan``/``admit``/``execute`` output is
the next command's input. Exit codes: 0 done; 2 input error (``file_unreadable``,
``invalid_json``, ``non_object_root``, ``bare_providers_array``,
``settings_unreadable``, … and an unusable ledger), 3 contract rejection or ledger
blocker — each rendered in the chosen format on stdout (JSON: ``{"error", "code",
"exit_code"}``; Markdown: one line).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from ..admission import (
    ContractRejected,
    DownstreamSource,
    EvidenceInputError,
    EvidencePlan,
    EvidenceReceipt,
    LedgerCoverage,
    build_plan,
    build_request,
    check_admission,
    check_receipt,
    decide,
    discover,
    parse_inventory,
    parse_receipt,
    project,
    registry_rows,
    render,
    render_error,
    retire,
    verify_admission,
    verify_plan,
)
from ..admission.canonical import loads_value
from ..admission.models import Admission, ProviderRow
from ..clock import system_clock
from ..errors import InputError, SettingsError
from ..gateway.registry import known_kinds
from ..jsonio import MAX_JSON_BYTES, read_regular_file
from ..ledger import Ledger, LedgerError, resolve_ledger_path
from ..methods.public_github import (
    PROVIDER_ID as PUBLIC_GITHUB,
)
from ..methods.public_github import (
    PublicGitHub,
    github_endpoints,
    provider_row,
)
from ..settings import Settings

__all__ = ["register"]

Format = Literal["json", "markdown"]
Handler = Callable[[argparse.Namespace], int]

#: What a plan made here for a host-executed provider records as its envelope.
CALLER_ENVELOPE: dict[str, JsonValue] = {
    "executed_by": "caller_host",
    "permission_boundary": "provider",
    "provider_private": ["raw pages", "transcripts", "cookies", "credentials", "private notes"],
}


class ExecutionPreview(BaseModel):
    """``execute`` without ``--execute``: what would be read, and that nothing was."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    markdown_title: ClassVar[str] = "Execution preview (nothing read)"

    plan_id: str
    provider_id: str
    sources: tuple[str, ...]
    search_terms: tuple[str, ...]
    authorized: Literal[False] = False
    note: str = "pass --execute to authorise these anonymous source reads"


# -- registration ------------------------------------------------------------------------------


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--ledger", type=Path, help="ledger file (default: under the user's data folder)"
    )
    common.add_argument("--format", choices=["json", "markdown"], default="markdown")
    common.add_argument(
        "--config",
        type=Path,
        help="settings file (TOML): [ledger] path, [github] endpoints, [network] policy",
    )
    return common


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = _common()
    evidence = commands.add_parser("evidence", help="the evidence admission contract")
    steps = evidence.add_subparsers(dest="evidence_command", required=True)

    found = steps.add_parser("discover", parents=[common], help="provider inventory")
    found.add_argument("--connector-registry", action="store_true")
    found.add_argument("--provider-inventory-json", type=Path)
    found.set_defaults(handler=_guarded(run_discover))

    plan = steps.add_parser("plan", parents=[common], help="bind a request to one provider")
    plan.add_argument("--objective")
    plan.add_argument("--user-activity")
    plan.add_argument("--decision")
    plan.add_argument("--evidence-kind", action="append", default=[])
    plan.add_argument("--provider-inventory-json", type=Path)
    plan.add_argument("--preferred-provider-id")
    plan.add_argument("--public-github", action="store_true")
    plan.add_argument("--source", action="append", default=[])
    plan.add_argument("--search-term", action="append", default=[])
    plan.set_defaults(handler=_guarded(run_plan))

    receipt = steps.add_parser("receipt", parents=[common], help="check and record a receipt")
    receipt.add_argument("--plan-json", type=Path)
    receipt.add_argument("--receipt-json", type=Path)
    receipt.set_defaults(handler=_guarded(run_receipt))

    admit = steps.add_parser("admit", parents=[common], help="admit or reject sources")
    admit.add_argument("--plan-json", type=Path)
    admit.add_argument("--receipt-json", type=Path)
    admit.add_argument("--decision", choices=["admit", "reject"])
    admit.add_argument("--reason")
    admit.add_argument("--admit-source", action="append", default=[])
    admit.set_defaults(handler=_guarded(run_admit))

    readback = steps.add_parser("readback", parents=[common], help="the shared projection")
    readback.add_argument("--plan-json", type=Path)
    readback.add_argument("--receipt-json", type=Path)
    readback.add_argument("--admission-json", type=Path)
    readback.add_argument("--project")
    readback.add_argument("--execute", action="store_true")
    readback.set_defaults(handler=_guarded(run_readback))

    retired = steps.add_parser("retire", parents=[common], help="retirement readiness")
    retired.add_argument("--admission-json", type=Path)
    retired.add_argument("--downstream-source", action="append", default=[])
    retired.set_defaults(handler=_guarded(run_retire))

    execute = steps.add_parser("execute", parents=[common], help="run method:public-github")
    execute.add_argument("--plan-json", type=Path)
    execute.add_argument("--execute", action="store_true")
    execute.set_defaults(handler=_guarded(run_execute))

    ledger = commands.add_parser("ledger", help="the research ledger")
    ledger_steps = ledger.add_subparsers(dest="ledger_command", required=True)
    start = ledger_steps.add_parser("start", parents=[common], help="start a research project")
    start.add_argument("--project")
    start.add_argument("--question")
    start.set_defaults(handler=_guarded(run_ledger_start))


def _guarded(handler: Handler) -> Handler:
    """Render the contract's errors in the chosen format: 2 input, 3 rejection."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        fmt: Format = args.format
        try:
            return handler(args)
        except EvidenceInputError as exc:
            return _fail(exc.code, str(exc), 2, fmt)
        except ContractRejected as exc:
            return _fail(exc.reason, str(exc), 3, fmt)
        except LedgerError as exc:
            return _fail(exc.reason, str(exc), 2, fmt)

    return run


def _fail(code: str, message: str, exit_code: int, fmt: Format) -> int:
    sys.stdout.write(render_error(code, message, exit_code, fmt))
    return exit_code


def _print(record: BaseModel, fmt: Format, *notes: str) -> None:
    text = render(record, fmt)
    if fmt == "markdown" and notes:
        text += "".join(f"- {note}\n" for note in notes)
    sys.stdout.write(text)


# -- inputs --------------------------------------------------------------------------------------


def _need(args: argparse.Namespace, *names: str) -> None:
    missing = [
        "--" + name.replace("_", "-") for name in names if getattr(args, name) in (None, [], "")
    ]
    if missing:
        raise EvidenceInputError("missing_argument", f"{', '.join(missing)} required here")


def load_json_input(path: Path) -> JsonValue:
    """A JSON file given by path: ``file_unreadable`` when it cannot be read as a regular
    file, ``invalid_json`` when its text is not strict UTF-8 JSON (plus the hashing rules:
    ``float_in_hashed_record``, ``integer_out_of_range``, ``lone_surrogate``)."""
    try:
        data = read_regular_file(path)
    except InputError as exc:
        raise EvidenceInputError("file_unreadable", str(exc)) from None
    if len(data) > MAX_JSON_BYTES:
        raise EvidenceInputError(
            "file_unreadable", f"larger than {MAX_JSON_BYTES} bytes", origin=str(path)
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise EvidenceInputError("invalid_json", "not UTF-8 text", origin=str(path)) from None
    return loads_value(text, origin=str(path))


def _object(path: Path) -> dict[str, JsonValue]:
    value = load_json_input(path)
    if not isinstance(value, dict):
        kind = "an array" if isinstance(value, list) else "not an object"
        raise EvidenceInputError(
            "non_object_root", f"the root must be a JSON object ({kind})", origin=str(path)
        )
    return value


def _plan(path: Path) -> EvidencePlan:
    return verify_plan(_object(path))


def _receipt(path: Path) -> EvidenceReceipt:
    return parse_receipt(_object(path))


def _admission(path: Path) -> Admission:
    return verify_admission(_object(path))


def _settings(args: argparse.Namespace) -> Settings:
    """``--config`` when given, else the defaults (``settings_unreadable`` if it fails)."""
    if args.config is None:
        return Settings()
    try:
        return Settings.load(args.config)
    except SettingsError as exc:
        raise EvidenceInputError("settings_unreadable", str(exc)) from None


def _ledger_path(args: argparse.Namespace) -> Path:
    """``--ledger``, else the settings' ``[ledger] path``, else the user's data folder."""
    return resolve_ledger_path(args.ledger, _settings(args), os.environ)


def _run_async(args: argparse.Namespace, factory: Callable[[PublicGitHub], Any]) -> Any:
    settings = _settings(args)
    method = PublicGitHub(
        github_endpoints(settings.github, os.environ), settings.network, clock=system_clock
    )

    async def main() -> Any:
        try:
            return await factory(method)
        finally:
            await method.aclose()

    return asyncio.run(main())


# -- commands ------------------------------------------------------------------------------------


def run_discover(args: argparse.Namespace) -> int:
    groups: list[Sequence[ProviderRow]] = [(provider_row(ready=False, reason="not_probed"),)]
    if args.connector_registry:
        groups.append(registry_rows((f"connector:{kind}", "connector") for kind in known_kinds()))
    if args.provider_inventory_json is not None:
        root = load_json_input(args.provider_inventory_json)
        groups.append(parse_inventory(root, origin=str(args.provider_inventory_json)))
    _print(discover(*groups), args.format)
    return 0


def run_plan(args: argparse.Namespace) -> int:
    _need(args, "objective", "user_activity", "decision", "evidence_kind")
    if args.public_github:
        _need(args, "source", "search_term")
        made: EvidencePlan = _run_async(
            args,
            lambda method: method.plan(
                objective=args.objective,
                user_activity=args.user_activity,
                decision=args.decision,
                evidence_kinds=args.evidence_kind,
                sources=args.source,
                search_terms=args.search_term,
            ),
        )
        _print(made, args.format)
        return 0
    if args.source or args.search_term:
        raise EvidenceInputError(
            "missing_argument", "--source and --search-term need --public-github"
        )
    _need(args, "provider_inventory_json")
    rows = parse_inventory(
        load_json_input(args.provider_inventory_json), origin=str(args.provider_inventory_json)
    )
    request = build_request(args.objective, args.user_activity, args.decision, args.evidence_kind)
    made = build_plan(
        request,
        rows,
        preferred_provider_id=args.preferred_provider_id,
        envelope=CALLER_ENVELOPE,
    )
    _print(made, args.format)
    return 0


def run_receipt(args: argparse.Namespace) -> int:
    _need(args, "plan_json", "receipt_json")
    plan, receipt = _plan(args.plan_json), _receipt(args.receipt_json)
    observation = check_receipt(plan, receipt)
    with Ledger(_ledger_path(args)) as ledger:
        results = ledger.record_receipt(plan, receipt)
    _print(observation, args.format, _recorded(results[-1].inserted, results[-1].seq))
    return 0


def _recorded(inserted: bool, seq: int) -> str:
    return f"ledger: {'recorded' if inserted else 'already recorded'} (seq {seq})"


def run_admit(args: argparse.Namespace) -> int:
    _need(args, "plan_json", "receipt_json", "decision", "reason")
    plan, receipt = _plan(args.plan_json), _receipt(args.receipt_json)
    admission = decide(
        plan,
        receipt,
        decision=args.decision,
        reason=args.reason,
        admit_sources=args.admit_source,
        decided_by="parent",
    )
    with Ledger(_ledger_path(args)) as ledger:
        results = ledger.record_admission(plan, receipt, admission)
    _print(admission, args.format, _recorded(results[-1].inserted, results[-1].seq))
    return 0


def run_readback(args: argparse.Namespace) -> int:
    _need(args, "plan_json", "receipt_json")
    if args.execute:
        _need(args, "admission_json", "project")
    plan, receipt = _plan(args.plan_json), _receipt(args.receipt_json)
    admission = _admission(args.admission_json) if args.admission_json else None
    if admission is not None:
        check_admission(plan, receipt, admission)
    coverage: LedgerCoverage | None = None
    if admission is not None and args.project:
        path = _ledger_path(args)
        if args.execute:
            with Ledger(path) as ledger:
                coverage = ledger.write_readback(args.project, plan, receipt, admission)
        elif path.exists():
            with Ledger(path, create=False) as ledger:
                coverage = ledger.coverage(args.project, plan, admission)
        else:
            coverage = LedgerCoverage(
                project=args.project,
                question_matches=False,
                executed=False,
                missing_source_refs=admission.admitted_source_refs,
                write_blockers=("project_not_started",),
                state="empty",
            )
    readback = project(plan, receipt, admission, ledger=coverage)
    _print(readback, args.format)
    return 3 if coverage is not None and coverage.executed and coverage.write_blockers else 0


def run_retire(args: argparse.Namespace) -> int:
    _need(args, "admission_json")
    admission = _admission(args.admission_json)
    downstream: list[DownstreamSource | str] = list(args.downstream_source)
    path = _ledger_path(args)
    if path.exists():
        with Ledger(path, create=False) as ledger:
            downstream.extend(
                DownstreamSource(
                    source_ref=ref, admission_id=admission.admission_id, content_digest=digest
                )
                for ref, digest in ledger.downstream_for(admission)
            )
    _print(retire(admission, downstream), args.format)
    return 0


def run_execute(args: argparse.Namespace) -> int:
    _need(args, "plan_json")
    plan = _plan(args.plan_json)
    if plan.selected_provider.provider_id != PUBLIC_GITHUB:
        raise ContractRejected(
            "provider_not_executable",
            f"execute runs only {PUBLIC_GITHUB}; {plan.selected_provider.provider_id} "
            "runs in its host",
        )
    if not args.execute:
        preview = ExecutionPreview(
            plan_id=plan.plan_id,
            provider_id=PUBLIC_GITHUB,
            sources=tuple(_strings(plan.envelope.get("sources"))),
            search_terms=tuple(_strings(plan.envelope.get("search_terms"))),
        )
        _print(preview, args.format)
        return 0
    receipt: EvidenceReceipt = _run_async(args, lambda method: method.execute(plan))
    with Ledger(_ledger_path(args)) as ledger:
        results = ledger.record_receipt(plan, receipt)
    _print(receipt, args.format, _recorded(results[-1].inserted, results[-1].seq))
    return 0


def _strings(value: JsonValue) -> Sequence[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def run_ledger_start(args: argparse.Namespace) -> int:
    _need(args, "project", "question")
    with Ledger(_ledger_path(args)) as ledger:
        started = ledger.start_project(args.project, args.question)
    _print(started, args.format)
    return 0
