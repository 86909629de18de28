"""``external-query evidence …`` and ``external-query ledger …``: the admission contract
and its ledger on the command line (parse, call the contract, print).

JSON inputs are file paths, never inline JSON. Every command takes ``--ledger LEDGER`` (a
SQLite file or a ``postgresql://`` URL; default: the ``--config`` file's ``[ledger] url``
or ``path``, else ``ledger.sqlite3`` under the user's data folder), ``--format
json|markdown`` (markdown by default) and ``--config`` (its ``[[adapters]]`` serve
``discover --probe``; its ``[github]`` endpoints and ``[network]`` policy serve
``method:public-github``). JSON output is the record itself, so a saved
``plan``/``admit``/``execute`` output is the next command's input. Exit codes: 0 done; 2
input error (``file_unreadable``, ``invalid_json``, ``non_object_root``,
``bare_providers_array``, ``settings_unreadable``, … and an unusable ledger), 3 contract
rejection, ledger blocker, or a ledger that does not verify. Errors go to stderr in the
chosen format (JSON: ``{"error", "code", "exit_code"}``; Markdown: one line) and leave
stdout empty, so a redirected output file never holds an error.
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

from pydantic import BaseModel, JsonValue

from .._clock import system_clock
from .._frozen import Frozen
from .._jsonio import read_text_file
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
from ..admission._canonical import loads_value
from ..admission._discover import connector_id, probed_rows
from ..admission._models import Admission, ProviderRow
from ..errors import InputError, SettingsError
from ..gateway._registry import known_kinds
from ..methods._public_github import PROVIDER_ID as PUBLIC_GITHUB
from ..methods._public_github import PublicGitHub, github_endpoints, provider_row
from ..service import ExternalQueryService
from ..settings import LedgerSettings, Settings
from ..storage import (
    LedgerError,
    LedgerHead,
    LedgerTarget,
    UnsoundLedger,
    copy_ledger_to,
    migrate_ledger,
    open_ledger,
    parse_ledger_target,
    resolve_ledger,
)
from . import PROG
from ._help import Subparsers, add_command
from ._ledger_show import add_show_step

__all__ = [
    "CALLER_ENVELOPE",
    "EXIT_DONE",
    "EXIT_INPUT",
    "EXIT_LEDGER_INPUT",
    "EXIT_REJECTED",
    "FLOW",
    "PUBLIC_GITHUB_PROBED",
    "register",
]

Format = Literal["json", "markdown"]
#: discover --probe's public-github row: its readiness is a per-repository visibility check,
#: which ``plan --public-github`` makes for the repositories it names.
PUBLIC_GITHUB_PROBED = "probed_per_repository_at_plan"
Handler = Callable[[argparse.Namespace], int]

#: What a plan made here for a host-executed provider records as its envelope.
CALLER_ENVELOPE: dict[str, JsonValue] = {
    "executed_by": "caller_host",
    "permission_boundary": "provider",
    "provider_private": ["raw pages", "transcripts", "cookies", "credentials", "private notes"],
}


class _ExecutionPreview(Frozen):
    """``execute`` without ``--execute``: what would be read, and that nothing was."""

    markdown_title: ClassVar[str] = "Execution preview (nothing read)"

    plan_id: str
    provider_id: str
    sources: tuple[str, ...]
    search_terms: tuple[str, ...]
    authorized: Literal[False] = False
    note: str = "pass --execute to authorise these anonymous source reads"


# -- registration ------------------------------------------------------------------------------

#: The ``evidence`` group's description: the whole flow, one line per step.
FLOW = """\
discover → plan → receipt → admit → readback → retire; save each step with --format json:
  discover --probe > providers.json  which providers answer right now (ready, or why not)
  plan > plan.json                   bind your request to exactly one ready provider
  receipt                            check and record what that provider returned
  admit > admission.json             admit or reject the receipt's sources, with a reason
  readback, then retire              write admitted sources to a ledger project; may they retire?"""

EXIT_DONE = (0, "done: the record on stdout")
EXIT_INPUT = (2, "input error: one line on stderr naming its code (json: {error, code, exit_code})")
EXIT_REJECTED = (3, "the contract refuses: one line on stderr with its reason")
_EQ = "external-query"
#: One request, as the examples write it (" \\\n" breaks an example's line in the epilog).
_ASK = (
    '--objective "How are retries configured?" \\\n'
    '--user-activity "Tune the client" --decision "Which retry limit to set" \\\n'
    "--evidence-kind documentation"
)
_SOURCE = "https://github.com/OWNER/REPO/blob/<40-hex commit>/README.md"


def _file(parser: argparse.ArgumentParser, flag: str, help: str, required: bool = False) -> None:
    parser.add_argument(flag, type=Path, required=required, metavar="FILE", help=help)


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--ledger",
        metavar="LEDGER",
        help="a SQLite file or a postgresql:// URL (default: --config's [ledger] url or path, "
        "else a file under the user's data folder)",
    )
    common.add_argument(
        "--format",
        choices=["json", "markdown"],
        default="markdown",
        help="markdown for people (default); json to save as the next step's input",
    )
    _file(
        common,
        "--config",
        "settings file (TOML): [[adapters]] to probe, [ledger] url or path, [github] endpoints, "
        "[network] policy",
    )
    return common


def register(commands: Subparsers) -> None:
    """Add the ``evidence`` command (its flow steps) and ``ledger`` to ``commands``."""
    common = _common()
    evidence = add_command(
        commands,
        "evidence",
        summary="the evidence admission contract: discover → plan → receipt → admit → readback",
        description=FLOW,
        exit_codes=[EXIT_DONE, EXIT_INPUT, EXIT_REJECTED],
        examples=[
            f"{_EQ} evidence discover --probe --config external-query.toml \\\n"
            "--format json > providers.json",
            f"{_EQ} evidence plan --help",
        ],
    )
    steps = evidence.add_subparsers(
        dest="evidence_command", required=True, metavar="STEP", help="one step of the flow"
    )
    _register_discover(steps, common)
    _register_plan(steps, common)
    _register_receipt(steps, common)
    _register_admit(steps, common)
    _register_readback(steps, common)
    _register_retire(steps, common)
    _register_execute(steps, common)
    _register_ledger(commands, common)


def _register_discover(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    found = add_command(
        steps,
        "discover",
        parents=[common],
        summary="list evidence providers and whether each is ready",
        description="List evidence providers with their lifecycle (declared, installed, "
        "enabled, ready).\nOnly a real observation makes a provider ready: --probe asks every "
        "adapter in --config,\nan inventory file states the caller's own observations.",
        exit_codes=[
            EXIT_DONE,
            EXIT_INPUT,
            (3, "an inventory row the contract refuses (invalid_inventory, duplicate id)"),
        ],
        examples=[
            f"{_EQ} evidence discover --probe --config external-query.toml \\\n"
            "--format json > providers.json",
            f"{_EQ} evidence discover --connector-registry --provider-inventory-json mine.json",
        ],
    )
    found.add_argument(
        "--probe",
        action="store_true",
        help="run the readiness probe of every adapter in --config (real, bounded requests); "
        "an adapter that answers is listed ready",
    )
    found.add_argument(
        "--connector-registry",
        action="store_true",
        help="also list every registered connector kind (never ready: registered is not ready)",
    )
    _file(
        found,
        "--provider-inventory-json",
        'merge your own observations: a JSON file {"providers": [...]}',
    )
    found.set_defaults(handler=_guarded(_run_discover))


def _register_plan(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    plan = add_command(
        steps,
        "plan",
        parents=[common],
        summary="bind a request to exactly one ready provider",
        description="Bind a request (objective, activity, decision, evidence kinds) to one "
        "ready provider:\nfrom an inventory (--provider-inventory-json), or method:public-github "
        "(--public-github).",
        exit_codes=[
            EXIT_DONE,
            EXIT_INPUT,
            (
                3,
                "refused: no_ready_provider, several_ready_providers (pass\n"
                "--preferred-provider-id), repository_not_public, github_unreachable, …",
            ),
        ],
        examples=[
            f"{_EQ} evidence plan {_ASK} \\\n"
            "--provider-inventory-json providers.json --format json > plan.json",
            f"{_EQ} evidence plan {_ASK} \\\n"
            f"--public-github --source {_SOURCE} \\\n"
            "--search-term retries --format json > plan.json",
        ],
    )
    plan.add_argument(
        "--objective", required=True, help="what the evidence is for, in one sentence"
    )
    plan.add_argument("--user-activity", required=True, help="what the user is doing that needs it")
    plan.add_argument("--decision", required=True, help="the decision the evidence informs")
    plan.add_argument(
        "--evidence-kind",
        action="append",
        required=True,
        metavar="KIND",
        help="a kind of evidence wanted, one token (repeat for several)",
    )
    _file(
        plan,
        "--provider-inventory-json",
        "the providers to choose from (discover's JSON output); needed without --public-github",
    )
    plan.add_argument(
        "--preferred-provider-id",
        metavar="ID",
        help="select this provider (it must be ready); needed when several are ready",
    )
    plan.add_argument(
        "--public-github",
        action="store_true",
        help="plan method:public-github: each --source repository's visibility is checked now",
    )
    plan.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="URL",
        help="with --public-github: https://github.com/OWNER/REPO/blob/<40-hex commit>/PATH "
        "(repeat)",
    )
    plan.add_argument(
        "--search-term",
        action="append",
        default=[],
        metavar="TEXT",
        help="with --public-github: a literal to find in each file (repeat)",
    )
    plan.set_defaults(handler=_guarded(_run_plan))


def _plan_and_receipt(parser: argparse.ArgumentParser) -> None:
    _file(parser, "--plan-json", "the plan (plan's JSON output)", required=True)
    _file(
        parser,
        "--receipt-json",
        "the provider's receipt for that plan (JSON; execute writes one for public-github)",
        required=True,
    )


def _register_receipt(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    receipt = add_command(
        steps,
        "receipt",
        parents=[common],
        summary="check a provider's receipt against its plan and record it",
        description="Check a provider's receipt against its plan and record it in the ledger.\n"
        "A recorded receipt is an observation only: not proof the provider ran, not coverage, "
        "not admission.",
        exit_codes=[
            (0, "done: the receipt is recorded (the observation on stdout)"),
            EXIT_INPUT,
            (3, "refused: plan_id_mismatch, foreign_provider, request_tampered, …"),
        ],
        examples=[
            f"{_EQ} evidence receipt --plan-json plan.json --receipt-json receipt.json",
            f"{_EQ} evidence receipt --plan-json plan.json --receipt-json receipt.json \\\n"
            "--ledger research.sqlite3 --format json",
        ],
    )
    _plan_and_receipt(receipt)
    receipt.set_defaults(handler=_guarded(_run_receipt))


def _register_admit(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    admit = add_command(
        steps,
        "admit",
        parents=[common],
        summary="admit or reject a receipt's sources, with a reason",
        description="Record your decision on a receipt: admit named sources, or reject it.\n"
        "Nothing is ever admitted automatically.",
        exit_codes=[
            EXIT_DONE,
            EXIT_INPUT,
            (3, "refused: unknown_source (not in the receipt), a tampered plan or receipt, …"),
        ],
        examples=[
            f"{_EQ} evidence admit --plan-json plan.json --receipt-json receipt.json \\\n"
            '--decision admit --reason "states the retry limit" \\\n'
            "--admit-source https://docs.example.org/retries --format json > admission.json",
            f"{_EQ} evidence admit --plan-json plan.json --receipt-json receipt.json \\\n"
            '--decision reject --reason "off topic"',
        ],
    )
    _plan_and_receipt(admit)
    admit.add_argument(
        "--decision",
        choices=["admit", "reject"],
        required=True,
        help="admit the named sources, or reject the receipt",
    )
    admit.add_argument("--reason", required=True, help="why, in one line (kept with the decision)")
    admit.add_argument(
        "--admit-source",
        action="append",
        default=[],
        metavar="REF",
        help="a source_ref of the receipt to admit (repeat; admit needs one, reject none)",
    )
    admit.set_defaults(handler=_guarded(_run_admit))


def _register_readback(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    readback = add_command(
        steps,
        "readback",
        parents=[common],
        summary="show the admitted evidence; --execute writes it to a ledger project",
        description="The one projection of plan, receipt and decision (compact findings, "
        "references, digests).\nWith --project it compares with the ledger project; "
        "with --execute it writes the admitted sources there.",
        exit_codes=[
            EXIT_DONE,
            EXIT_INPUT,
            (
                3,
                "refused, or --execute met a write blocker (project_not_started,\n"
                "question_mismatch, …): the projection still prints on stdout",
            ),
        ],
        examples=[
            f"{_EQ} evidence readback --plan-json plan.json --receipt-json receipt.json \\\n"
            "--admission-json admission.json",
            f"{_EQ} evidence readback --plan-json plan.json --receipt-json receipt.json \\\n"
            "--admission-json admission.json --project retries --execute",
        ],
    )
    _plan_and_receipt(readback)
    _file(
        readback,
        "--admission-json",
        "the decision (admit's JSON output); without it the sources are shown unjudged",
    )
    readback.add_argument(
        "--project", help="ledger project to compare with (or write to, with --execute)"
    )
    readback.add_argument(
        "--execute",
        action="store_true",
        help="write the admitted sources into --project (needs --admission-json)",
    )
    readback.set_defaults(handler=_guarded(_run_readback))


def _register_retire(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    retired = add_command(
        steps,
        "retire",
        parents=[common],
        summary="say whether an admission may retire",
        description="An admission retires once every admitted source was read back downstream\n"
        "(the ledger's readback counts, and so does each --downstream-source); a rejection "
        "retires at once.",
        exit_codes=[
            (0, "done: the state (retained or retired) on stdout"),
            EXIT_INPUT,
            (3, "refused: admission_tampered"),
        ],
        examples=[
            f"{_EQ} evidence retire --admission-json admission.json",
            f"{_EQ} evidence retire --admission-json admission.json \\\n"
            "--downstream-source https://docs.example.org/retries --format json",
        ],
    )
    _file(retired, "--admission-json", "the decision (admit's JSON output)", required=True)
    retired.add_argument(
        "--downstream-source",
        action="append",
        default=[],
        metavar="REF",
        help="an admitted source_ref already read back elsewhere (repeat)",
    )
    retired.set_defaults(handler=_guarded(_run_retire))


def _register_execute(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    execute = add_command(
        steps,
        "execute",
        parents=[common],
        summary="run a method:public-github plan and record its receipt",
        description="Run a method:public-github plan: anonymous, bounded reads of the planned "
        "files.\nWithout --execute it only previews what would be read.",
        exit_codes=[
            (0, "done: the preview, or the receipt (recorded in the ledger) on stdout"),
            EXIT_INPUT,
            (3, "refused: provider_not_executable, endpoint_mismatch, a tampered plan"),
        ],
        examples=[
            f"{_EQ} evidence execute --plan-json plan.json",
            f"{_EQ} evidence execute --plan-json plan.json --execute --format json > receipt.json",
        ],
    )
    _file(
        execute,
        "--plan-json",
        "a method:public-github plan (plan --public-github's JSON output)",
        required=True,
    )
    execute.add_argument(
        "--execute",
        action="store_true",
        help="authorise the reads (without it: a preview, nothing is read)",
    )
    execute.set_defaults(handler=_guarded(_run_execute))


#: Exit 2 for the ledger commands: bad input, and a ledger that cannot be used as it is.
EXIT_LEDGER_INPUT = (
    2,
    "input error, or an unusable ledger (ledger_unavailable, ledger_busy,\n"
    "ledger_needs_migration: run ledger migrate): one line on stderr",
)
_PG = "postgresql://ledger@db.internal/research"


def _register_ledger(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    ledger = add_command(
        commands,
        "ledger",
        summary="the research ledger (SQLite file or PostgreSQL) that answers and readback "
        "write to",
        description="The research ledger: a SQLite file (embedded default) or a PostgreSQL "
        "database many\nprocesses share ([ledger] url). start a project; migrate creates or "
        "updates the schema;\nverify recomputes every digest and the hash chain; copy moves "
        "a ledger into another.",
        exit_codes=[
            (0, "done: the result on stdout"),
            EXIT_LEDGER_INPUT,
            (3, "refused (project_question_conflict), or a ledger that does not verify"),
        ],
        examples=[
            f'{_EQ} ledger start --project retries --question "How are retries configured?"',
            f"{_EQ} ledger migrate --config external-query.toml",
        ],
    )
    ledger_steps = ledger.add_subparsers(
        dest="ledger_command", required=True, metavar="STEP", help="what to do with the ledger"
    )
    _register_ledger_start(ledger_steps, common)
    _register_ledger_migrate(ledger_steps, common)
    _register_ledger_verify(ledger_steps, common)
    _register_ledger_copy(ledger_steps, common)
    add_show_step(ledger_steps, common, guarded=_guarded, target=_ledger)


def _register_ledger_start(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    """``ledger start``: a research project begun."""
    start_exits = [
        (0, "done: the project on stdout (starting it again with the same question is a no-op)"),
        EXIT_LEDGER_INPUT,
        (3, "refused: project_question_conflict (the project has another question)"),
    ]
    start = add_command(
        steps,
        "start",
        parents=[common],
        summary="start a research project",
        description="Start a research project. readback --execute writes a plan's admitted "
        "sources\ninto it only when the plan's objective is this question.",
        exit_codes=start_exits,
        examples=[
            f'{_EQ} ledger start --project retries --question "How are retries configured?"',
            f'{_EQ} ledger start --project retries --question "How are retries configured?" \\\n'
            "--ledger research.sqlite3 --format json",
        ],
    )
    start.add_argument("--project", required=True, help="the project's name")
    start.add_argument(
        "--question", required=True, help="the research question (a plan's objective)"
    )
    start.set_defaults(handler=_guarded(_run_ledger_start))


def _register_ledger_migrate(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    """``ledger migrate``: the schema created or brought up to date."""
    migrate = add_command(
        steps,
        "migrate",
        parents=[common],
        summary="create the ledger's schema or bring it up to date",
        description="Create the ledger's tables, or apply the migrations an older schema "
        "lacks, in one\ntransaction (a concurrent migrate waits, then finds nothing to do). "
        "A PostgreSQL ledger\nis never created or migrated otherwise: run this before the "
        "first answer, and after\nevery upgrade that says its schema is older.",
        exit_codes=[(0, "done: the versions before and after on stdout"), EXIT_LEDGER_INPUT],
        examples=[
            f"{_EQ} ledger migrate --config external-query.toml",
            f'{_EQ} ledger migrate --ledger "{_PG}?options=-csearch_path%3Dledger"',
        ],
    )
    migrate.set_defaults(handler=_guarded(_run_ledger_migrate))


def _register_ledger_verify(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    """``ledger verify``: every digest, id, seq and the hash chain checked."""
    verify = add_command(
        steps,
        "verify",
        parents=[common],
        summary="check every record's digests, ids, seq and the hash chain",
        description="Recompute every record's body digest and content id, check that seq "
        "has no gap, and\nfollow the hash chain from the first record to the last; also "
        "the storage's own check\n(SQLite: PRAGMA integrity_check). Then check that the "
        "chain still reaches the head kept\nbeside it (SQLite: <file>.head; PostgreSQL: "
        "the meta table) and, with --expect-head,\na head you kept elsewhere (records:"
        "last_chain of an earlier verify). Reads only.",
        exit_codes=[
            (0, "sound: the verification on stdout"),
            EXIT_LEDGER_INPUT,
            (
                3,
                "an integrity failure: the verification on stdout (first bad seq, problem; "
                "head_mismatch: records cut off the end or rewritten)",
            ),
        ],
        examples=[
            f"{_EQ} ledger verify --config external-query.toml",
            f"{_EQ} ledger verify --ledger research.sqlite3 --format json",
            f"{_EQ} ledger verify --ledger research.sqlite3 --expect-head 120:sha256:…",
        ],
    )
    verify.add_argument(
        "--expect-head",
        metavar="SEQ:DIGEST",
        help="a head kept elsewhere (seq and its chain value): the chain must still reach it",
    )
    verify.set_defaults(handler=_guarded(_run_ledger_verify))


def _register_ledger_copy(steps: Subparsers, common: argparse.ArgumentParser) -> None:
    """``ledger copy``: the ledger copied into another one, verified."""
    copy = add_command(
        steps,
        "copy",
        parents=[common],
        summary="copy the ledger into another one (e.g. SQLite into PostgreSQL), verified",
        description="Copy every record (same seq, digests, chain and time stamps), project "
        "and project source\nof the ledger (--ledger, else --config's) into --to, in one "
        "transaction, then verify\nthe copy. --to must be migrated and hold nothing or an "
        "earlier copy of the same\nledger (then only the rest is copied: copying again is a "
        "no-op). Copy before any\nprocess writes to --to.",
        exit_codes=[
            (0, "done: what was copied and the copy's verification on stdout"),
            (
                2,
                "input error, an unusable ledger, or ledger_copy_conflict (--to holds other\n"
                "records): one line on stderr, nothing written",
            ),
            (3, "ledger_unsound: the source, or the copy, does not verify"),
        ],
        examples=[
            f"{_EQ} ledger copy --ledger research.sqlite3 --to {_PG}",
            f"{_EQ} ledger copy --config external-query.toml --to archive.sqlite3 --format json",
        ],
    )
    copy.add_argument(
        "--to",
        required=True,
        metavar="LEDGER",
        help="the ledger to copy into: a postgresql:// URL or a SQLite file (migrated first)",
    )
    copy.set_defaults(handler=_guarded(_run_ledger_copy))


def _guarded(handler: Handler) -> Handler:
    """Render the contract's errors in the chosen format: 2 input, 3 rejection."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        fmt: Format = args.format
        try:
            return handler(args)
        except EvidenceInputError as exc:
            return _fail(exc.reason, str(exc), 2, fmt)
        except ContractRejected as exc:
            return _fail(exc.reason, str(exc), 3, fmt)
        except UnsoundLedger as exc:
            return _fail(exc.reason, str(exc), 3, fmt)
        except LedgerError as exc:
            return _fail(exc.reason, str(exc), 2, fmt)

    return run


def _fail(code: str, message: str, exit_code: int, fmt: Format) -> int:
    # stderr, whatever the format: `plan … > plan.json` must never save an error as a plan.
    sys.stderr.write(render_error(code, message, exit_code, fmt))
    return exit_code


def _print(record: BaseModel, fmt: Format, *notes: str) -> None:
    text = render(record, fmt)
    if fmt == "markdown" and notes:
        text += "".join(f"- {note}\n" for note in notes)
    sys.stdout.write(text)


# -- inputs --------------------------------------------------------------------------------------


def _need(args: argparse.Namespace, *names: str, why: str = "here") -> None:
    """Flags a mode needs (argparse marks the always-required ones itself)."""
    missing = [
        "--" + name.replace("_", "-") for name in names if getattr(args, name) in (None, [], "")
    ]
    if missing:
        raise EvidenceInputError("missing_argument", f"{', '.join(missing)} required {why}")


def _load_json_input(path: Path) -> JsonValue:
    """A JSON file given by path: ``file_unreadable`` when it cannot be read as a regular
    file, ``invalid_json`` when its text is not strict UTF-8 JSON (plus the hashing rules:
    ``float_in_hashed_record``, ``integer_out_of_range``, ``lone_surrogate``)."""
    refuse = functools.partial(EvidenceInputError, origin=str(path))
    return loads_value(read_text_file(path, refuse=refuse), origin=str(path))


def _object(path: Path) -> dict[str, JsonValue]:
    value = _load_json_input(path)
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


def _ledger(args: argparse.Namespace) -> LedgerTarget:
    """``--ledger``, else the settings' ``[ledger] url`` or ``path``, else the user's data
    folder."""
    return resolve_ledger(args.ledger, _settings(args), os.environ)


def _exists(target: LedgerTarget) -> bool:
    """Whether there can be anything to read: a SQLite file that is missing holds nothing
    (and a read must not create it); a database always answers for itself."""
    return not isinstance(target, Path) or target.exists()


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


def _run_discover(args: argparse.Namespace) -> int:
    if args.probe:
        _need(args, "config", why="with --probe (it names the adapters to probe)")
    # public-github's readiness is a per-repository visibility check: plan --public-github.
    github_reason = PUBLIC_GITHUB_PROBED if args.probe else "not_probed"
    groups: list[Sequence[ProviderRow]] = [(provider_row(ready=False, reason=github_reason),)]
    if args.connector_registry:
        groups.append(registry_rows((connector_id(kind), "connector") for kind in known_kinds()))
    if args.provider_inventory_json is not None:
        root = _load_json_input(args.provider_inventory_json)
        groups.append(parse_inventory(root, origin=str(args.provider_inventory_json)))
    if args.probe:
        # Last: a probe made just now supersedes registry presence and older observations.
        groups.append(_probe(_settings(args)))
    _print(discover(*groups), args.format)
    return 0


def _probe(settings: Settings) -> tuple[ProviderRow, ...]:
    """Every configured adapter's real readiness probe, through the service that answers."""
    # Probing reads no ledger and asks no model: leave both out of the service.
    quiet = settings.model_copy(update={"ledger": LedgerSettings(), "llm": None})
    try:
        with ExternalQueryService(quiet) as service:
            readiness = service.probe()
    except InputError as exc:
        raise EvidenceInputError("settings_unreadable", str(exc)) from None
    enabled = {adapter.id: adapter.enabled for adapter in settings.adapters}
    return probed_rows(readiness, enabled=enabled)


def _run_plan(args: argparse.Namespace) -> int:
    if args.public_github:
        _need(args, "source", "search_term", why="with --public-github")
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
    _need(args, "provider_inventory_json", why="(or plan with --public-github)")
    rows = parse_inventory(
        _load_json_input(args.provider_inventory_json), origin=str(args.provider_inventory_json)
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


def _run_receipt(args: argparse.Namespace) -> int:
    plan, receipt = _plan(args.plan_json), _receipt(args.receipt_json)
    observation = check_receipt(plan, receipt)
    with open_ledger(_ledger(args)) as ledger:
        results = ledger.record_receipt(plan, receipt)
    _print(observation, args.format, _recorded(results[-1].inserted, results[-1].seq))
    return 0


def _recorded(inserted: bool, seq: int) -> str:
    return f"ledger: {'recorded' if inserted else 'already recorded'} (seq {seq})"


def _run_admit(args: argparse.Namespace) -> int:
    plan, receipt = _plan(args.plan_json), _receipt(args.receipt_json)
    admission = decide(
        plan,
        receipt,
        decision=args.decision,
        reason=args.reason,
        admit_sources=args.admit_source,
        decided_by="parent",
    )
    with open_ledger(_ledger(args)) as ledger:
        results = ledger.record_admission(plan, receipt, admission)
    _print(admission, args.format, _recorded(results[-1].inserted, results[-1].seq))
    return 0


def _run_readback(args: argparse.Namespace) -> int:
    if args.execute:
        _need(args, "admission_json", "project", why="with --execute")
    plan, receipt = _plan(args.plan_json), _receipt(args.receipt_json)
    admission = _admission(args.admission_json) if args.admission_json else None
    if admission is not None:
        check_admission(plan, receipt, admission)
    coverage: LedgerCoverage | None = None
    if admission is not None and args.project:
        target = _ledger(args)
        if args.execute:
            with open_ledger(target) as ledger:
                coverage = ledger.write_readback(args.project, plan, receipt, admission)
        elif _exists(target):
            with open_ledger(target, create=False) as ledger:
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
    if coverage is not None and coverage.executed and coverage.write_blockers:
        # The projection above is the result; stderr says in one line why exit is 3.
        blockers = ", ".join(coverage.write_blockers)
        sys.stderr.write(f"{PROG}: readback: not every source was written ({blockers})\n")
        return 3
    return 0


def _run_retire(args: argparse.Namespace) -> int:
    admission = _admission(args.admission_json)
    downstream: list[DownstreamSource | str] = list(args.downstream_source)
    target = _ledger(args)
    if _exists(target):
        with open_ledger(target, create=False) as ledger:
            downstream.extend(
                DownstreamSource(
                    source_ref=ref, admission_id=admission.admission_id, content_digest=digest
                )
                for ref, digest in ledger.downstream_for(admission)
            )
    _print(retire(admission, downstream), args.format)
    return 0


def _run_execute(args: argparse.Namespace) -> int:
    plan = _plan(args.plan_json)
    if plan.selected_provider.provider_id != PUBLIC_GITHUB:
        raise ContractRejected(
            "provider_not_executable",
            f"execute runs only {PUBLIC_GITHUB}; {plan.selected_provider.provider_id} "
            "runs in its host",
        )
    if not args.execute:
        preview = _ExecutionPreview(
            plan_id=plan.plan_id,
            provider_id=PUBLIC_GITHUB,
            sources=tuple(_strings(plan.envelope.get("sources"))),
            search_terms=tuple(_strings(plan.envelope.get("search_terms"))),
        )
        _print(preview, args.format)
        return 0
    receipt: EvidenceReceipt = _run_async(args, lambda method: method.execute(plan))
    with open_ledger(_ledger(args)) as ledger:
        results = ledger.record_receipt(plan, receipt)
    _print(receipt, args.format, _recorded(results[-1].inserted, results[-1].seq))
    return 0


def _strings(value: JsonValue) -> Sequence[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def _run_ledger_start(args: argparse.Namespace) -> int:
    with open_ledger(_ledger(args)) as ledger:
        started = ledger.start_project(args.project, args.question)
    _print(started, args.format)
    return 0


def _run_ledger_migrate(args: argparse.Namespace) -> int:
    _print(migrate_ledger(_ledger(args)), args.format)
    return 0


def _run_ledger_verify(args: argparse.Namespace) -> int:
    expected = LedgerHead.parse(args.expect_head) if args.expect_head is not None else None
    with open_ledger(_ledger(args), create=False) as ledger:
        checked = ledger.verify(expected)
    _print(checked, args.format)
    if not checked.ok:
        where = f" at seq {checked.first_bad_seq}" if checked.first_bad_seq else ""
        found = checked.problem or f"integrity {checked.integrity}"
        sys.stderr.write(f"{PROG}: ledger verify: {found}{where}\n")
        return 3
    return 0


def _run_ledger_copy(args: argparse.Namespace) -> int:
    _print(copy_ledger_to(_ledger(args), parse_ledger_target(args.to)), args.format)
    return 0
