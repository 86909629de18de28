"""``external-query evidence …`` and ``ledger start``: the round trip through files, and
every error class in both output formats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from external_query_service.cli import main
from external_query_service.methods._public_github import PROVIDER_ID as PUBLIC_GITHUB
from external_query_service.storage import SQLiteLedger as Ledger
from external_query_service.testing import SEARX, LoopbackServer, World
from external_query_service.testing.server import json_reply
from tests.support.paths import REPO
from tests.support.world import (
    ORIGINAL_SOURCE,
    closed_port,
    provider_receipt,
    provider_row,
)

REPO = REPO

OBJECTIVE = "Compare current behavior"
SOURCE = ORIGINAL_SOURCE
OTHER = "https://example.com/other"


class Cli:
    """Runs the CLI with a private ledger and keeps its files in one folder."""

    def __init__(self, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.folder = folder
        self.capsys = capsys
        self.ledger = folder / "ledger.sqlite3"
        self.err = ""

    def write(self, name: str, content: Any) -> Path:
        path = self.folder / name
        text = content if isinstance(content, str) else json.dumps(content)
        path.write_text(text, encoding="utf-8")
        return path

    def run(self, *args: str, fmt: str = "json") -> tuple[int, str]:
        """Exit code and stdout; stderr is kept in ``self.err``."""
        code = main([*args, "--ledger", str(self.ledger), "--format", fmt])
        captured = self.capsys.readouterr()
        self.err = captured.err
        return code, captured.out

    def fail(self, *args: str, fmt: str = "json") -> tuple[int, str]:
        """A run that fails: its error (stderr), after checking stdout stayed empty."""
        code = main([*args, "--ledger", str(self.ledger), "--format", fmt])
        captured = self.capsys.readouterr()
        assert code != 0
        assert captured.out == ""
        return code, captured.err

    def ok(self, *args: str) -> Any:
        code, out = self.run(*args)
        assert code == 0, out
        return json.loads(out)

    def plan(self, **overrides: Any) -> Path:
        inventory = self.write("providers.json", {"providers": [provider_row()]})
        data = self.ok(
            "evidence", "plan", "--objective", overrides.get("objective", OBJECTIVE),
            "--user-activity", "Choose an implementation", "--decision", "Whether to adopt it",
            "--evidence-kind", "current_behavior", "--evidence-kind", "counterexample",
            "--provider-inventory-json", str(inventory),
        )  # fmt: skip
        return self.write(overrides.get("name", "plan.json"), data)

    def receipt(self, plan_path: Path, **overrides: Any) -> Path:
        plan = json.loads(plan_path.read_text(encoding="utf-8"))
        return self.write("receipt.json", {**provider_receipt(plan, [SOURCE, OTHER]), **overrides})


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(tmp_path, capsys)


def test_round_trip_through_files_ends_in_retirement(cli: Cli) -> None:
    plan = cli.plan()
    receipt = cli.receipt(plan)
    seen = cli.ok("evidence", "receipt", "--plan-json", str(plan), "--receipt-json", str(receipt))
    assert (seen["execution_attested"], seen["admitted"]) == (False, False)

    admit = ("evidence", "admit", "--plan-json", str(plan), "--receipt-json", str(receipt),
             "--decision", "admit", "--reason", "Direct source answers the decision",
             "--admit-source", SOURCE)  # fmt: skip
    admission = cli.write("admission.json", cli.ok(*admit))
    assert json.loads(admission.read_text())["admitted_sources"][0]["source_ref"] == SOURCE

    preview = cli.ok(
        "evidence", "readback", "--plan-json", str(plan), "--receipt-json", str(receipt),
        "--admission-json", str(admission), "--project", "research",
    )  # fmt: skip
    assert preview["ledger"]["write_blockers"] == ["project_not_started"]
    assert preview["retirement"]["state"] == "retained"

    started = cli.ok("ledger", "start", "--project", "research", "--question", OBJECTIVE)
    assert started["created"] is True
    readback = ("evidence", "readback", "--plan-json", str(plan), "--receipt-json",
                str(receipt), "--admission-json", str(admission), "--project", "research",
                "--execute")  # fmt: skip
    written = cli.ok(*readback)
    assert written["ledger"]["written_source_refs"] == [SOURCE]
    assert written["ledger"]["state"] == "complete"
    assert written["retirement"]["state"] == "retired"
    retry = cli.ok(*readback)
    assert (retry["ledger"]["written_source_refs"], retry["ledger"]["state"]) == ([], "complete")

    # retire counts the ledger's readback with matching lineage ...
    retired = cli.ok("evidence", "retire", "--admission-json", str(admission))
    assert (retired["state"], retired["read_back_source_refs"]) == ("retired", [SOURCE])


def test_retire_without_a_ledger_counts_only_the_named_downstream_sources(cli: Cli) -> None:
    plan = cli.plan()
    receipt = cli.receipt(plan)
    admission = cli.write(
        "admission.json",
        cli.ok("evidence", "admit", "--plan-json", str(plan), "--receipt-json", str(receipt),
               "--decision", "admit", "--reason", "r", "--admit-source", SOURCE,
               "--admit-source", OTHER),
    )  # fmt: skip
    cli.ledger = cli.folder / "fresh.sqlite3"
    waiting = cli.ok("evidence", "retire", "--admission-json", str(admission),
                     "--downstream-source", SOURCE)  # fmt: skip
    assert (waiting["state"], waiting["missing_source_refs"]) == ("retained", [OTHER])
    done = cli.ok("evidence", "retire", "--admission-json", str(admission),
                  "--downstream-source", SOURCE, "--downstream-source", OTHER)  # fmt: skip
    assert done["state"] == "retired"
    assert not cli.ledger.exists()


def test_admitting_twice_prints_the_same_admission_and_records_it_once(cli: Cli) -> None:
    plan = cli.plan()
    receipt = cli.receipt(plan)
    args = ("evidence", "admit", "--plan-json", str(plan), "--receipt-json", str(receipt),
            "--decision", "reject", "--reason", "Off topic")  # fmt: skip
    assert cli.ok(*args) == cli.ok(*args)
    code, markdown = cli.run(*args, fmt="markdown")
    assert code == 0
    assert "already recorded" in markdown


def test_admitting_from_two_cli_processes_at_once_records_one_admission(cli: Cli) -> None:
    plan = cli.plan()
    receipt = cli.receipt(plan)
    command = [sys.executable, "-m", "external_query_service.cli", "evidence", "admit",
               "--plan-json", str(plan), "--receipt-json", str(receipt), "--decision", "admit",
               "--reason", "Direct source", "--admit-source", SOURCE,
               "--ledger", str(cli.ledger), "--format", "json"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = [
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    first, second = (json.loads(out) for out, _ in outputs)
    assert first == second
    with Ledger(cli.ledger, create=False) as ledger:
        assert (ledger.count("plan"), ledger.count("receipt"), ledger.count("admission")) == (
            1,
            1,
            1,
        )
        assert ledger.has_record(first["admission_id"])


def test_a_preferred_provider_id_selects_among_ready_providers(cli: Cli) -> None:
    inventory = cli.write(
        "providers.json",
        {"providers": [provider_row(), provider_row(provider_id="connector:search")]},
    )
    args = ["evidence", "plan", "--objective", OBJECTIVE, "--user-activity", "a",
            "--decision", "d", "--evidence-kind", "k", "--provider-inventory-json",
            str(inventory)]  # fmt: skip
    code, err = cli.fail(*args)
    assert (code, json.loads(err)["code"]) == (3, "several_ready_providers")
    chosen = cli.ok(*args, "--preferred-provider-id", "connector:search")
    assert chosen["selected_provider"] == {
        "provider_id": "connector:search",
        "provider_kind": "connector",
        "selected_by": "preferred",
    }
    assert chosen["preferred_provider_id"] == "connector:search"


def test_discover_projects_registry_rows_as_not_ready(cli: Cli) -> None:
    inventory = cli.write("providers.json", {"providers": [provider_row()]})
    found = cli.ok("evidence", "discover", "--connector-registry", "--provider-inventory-json",
                   str(inventory))  # fmt: skip
    rows = {row["provider_id"]: row for row in found["providers"]}
    assert rows["connector:docs"]["ready"] is True
    assert rows["connector:searxng"]["ready"] is False
    assert rows["connector:searxng"]["unavailable_reason"] == "registry_presence_is_not_readiness"
    assert rows["method:public-github"]["unavailable_reason"] == "not_probed"
    assert (found["execution_observed"], found["evidence_coverage_observed"]) == (False, False)


def test_markdown_is_the_default_format(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["evidence", "discover", "--ledger", str(cli.ledger)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("## Provider inventory")


def test_the_ledger_defaults_to_the_users_data_folder(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(cli.folder / "xdg"))
    code = main(["ledger", "start", "--project", "p", "--question", "q", "--format", "json"])
    assert code == 0, capsys.readouterr().out
    assert (cli.folder / "xdg" / "external-query" / "ledger.sqlite3").is_file()


def test_a_settings_file_names_the_ledger_and_the_github_endpoints(
    cli: Cli, capsys: pytest.CaptureFixture[str], loopback: LoopbackServer
) -> None:
    loopback.route("/repos/o/r", json_reply({"private": False, "visibility": "public"}))
    config = cli.write(
        "settings.toml",
        f'[ledger]\npath = "from-settings.sqlite3"\n\n[github]\n'
        f'api_url = "{loopback.url("")}"\nraw_url = "{loopback.url("/raw")}"\n',
    )
    code = main(["ledger", "start", "--project", "p", "--question", "q",
                 "--config", str(config), "--format", "json"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert (cli.folder / "from-settings.sqlite3").is_file()
    # --ledger still wins over the settings file.
    code = main(["ledger", "start", "--project", "p", "--question", "q", "--config",
                 str(config), "--ledger", str(cli.ledger), "--format", "json"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert cli.ledger.is_file()
    # The visibility probe goes to the endpoint the settings file names.
    code = main(["evidence", "plan", "--public-github", "--objective", "o",
                 "--user-activity", "a", "--decision", "d", "--evidence-kind", "k",
                 "--source", f"https://github.com/o/r/blob/{'0' * 40}/README.md",
                 "--search-term", "x", "--config", str(config), "--format", "json"])  # fmt: skip
    plan = json.loads(capsys.readouterr().out)
    assert code == 0, plan
    assert plan["envelope"]["api_url"] == loopback.url("").rstrip("/")
    assert len(loopback.requests_to("/repos/o/r")) == 1


@pytest.mark.parametrize("fmt", ["json", "markdown"])
@pytest.mark.parametrize("content", [None, "[ledger\n", "[nope]\nx = 1\n"])
def test_an_unusable_settings_file_is_a_named_input_error(
    cli: Cli, fmt: str, content: str | None
) -> None:
    config = cli.folder / "settings.toml"
    if content is not None:
        config.write_text(content, encoding="utf-8")
    code, err = cli.fail("ledger", "start", "--project", "p", "--question", "q",
                         "--config", str(config), fmt=fmt)  # fmt: skip
    assert code == 2
    if fmt == "json":
        assert json.loads(err)["code"] == "settings_unreadable"
    else:
        assert err.startswith("**error** `settings_unreadable` (exit 2): ")
    assert not cli.ledger.exists()


# -- errors --------------------------------------------------------------------------------


def _error(cli: Cli, args: list[str], fmt: str) -> tuple[int, str]:
    return cli.fail(*args, fmt=fmt)


def _inventory_plan(path: Path) -> list[str]:
    return ["evidence", "plan", "--objective", "o", "--user-activity", "a", "--decision", "d",
            "--evidence-kind", "k", "--provider-inventory-json", str(path)]  # fmt: skip


INPUT_CASES: list[tuple[str, str, Any]] = [
    ("file_unreadable", "missing", None),
    ("file_unreadable", "inline", '{"providers": []}'),
    ("file_unreadable", "folder", None),
    ("file_unreadable", "fifo", None),
    ("invalid_json", "text", "{not json"),
    ("invalid_json", "text", '{"providers": [], "providers": []}'),
    ("invalid_json", "text", '{"providers": [NaN]}'),
    ("invalid_json", "bytes", b'{"providers": "\xff"}'),
    ("lone_surrogate", "text", '{"providers": ["\\ud800"]}'),
    ("float_in_hashed_record", "text", '{"providers": [1.5]}'),
    ("non_object_root", "text", '"providers"'),
    ("bare_providers_array", "text", "[]"),
]


def _input_file(cli: Cli, kind: str, content: Any) -> Path:
    path = cli.folder / "input.json"
    if kind == "inline":
        return Path(content)  # JSON text where a path belongs: never parsed as JSON
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "bytes":
        path.write_bytes(content)
    elif kind == "text":
        path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize(("code", "kind", "content"), INPUT_CASES)
def test_every_input_error_is_named_in_json(cli: Cli, code: str, kind: str, content: Any) -> None:
    exit_code, out = _error(cli, _inventory_plan(_input_file(cli, kind, content)), "json")
    assert exit_code == 2
    error = json.loads(out)
    assert (error["code"], error["exit_code"]) == (code, 2)
    assert error["error"]


@pytest.mark.parametrize(("code", "kind", "content"), INPUT_CASES)
def test_every_input_error_is_one_markdown_line(
    cli: Cli, code: str, kind: str, content: Any
) -> None:
    exit_code, out = _error(cli, _inventory_plan(_input_file(cli, kind, content)), "markdown")
    assert exit_code == 2
    assert out.count("\n") == 1
    assert out.startswith(f"**error** `{code}` (exit 2): ")


def test_a_non_object_plan_root_is_its_own_error(cli: Cli) -> None:
    path = cli.write("plan.json", [1, 2])
    code, err = cli.fail("evidence", "receipt", "--plan-json", str(path), "--receipt-json",
                         str(path))  # fmt: skip
    assert (code, json.loads(err)["code"]) == (2, "non_object_root")


def test_a_missing_required_flag_is_one_usage_line_on_stderr(cli: Cli) -> None:
    code, err = cli.fail("evidence", "admit", "--decision", "admit")
    assert code == 2
    assert err.count("\n") == 1
    assert "required: --plan-json, --receipt-json, --reason" in err


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_a_flag_the_chosen_mode_needs_is_reported_in_the_chosen_format(cli: Cli, fmt: str) -> None:
    plan = cli.plan()
    receipt = cli.receipt(plan)
    code, err = cli.fail("evidence", "readback", "--plan-json", str(plan), "--receipt-json",
                         str(receipt), "--execute", fmt=fmt)  # fmt: skip
    assert code == 2
    assert "missing_argument" in err
    assert "--admission-json, --project required with --execute" in err


def _rejection(cli: Cli, fmt: str, case: str) -> tuple[int, str]:
    plan = cli.plan()
    if case == "tampered_plan":
        data = json.loads(plan.read_text())
        data["request"]["decision"] = "Something else"
        data["request"]["request_id"] = "sha256:" + "0" * 64
        tampered = cli.write("tampered.json", data)
        return cli.fail("evidence", "receipt", "--plan-json", str(tampered), "--receipt-json",
                        str(cli.receipt(plan)), fmt=fmt)  # fmt: skip
    if case == "plan_id_mismatch":
        receipt = cli.receipt(plan, plan_id="sha256:" + "1" * 64)
        return cli.fail("evidence", "receipt", "--plan-json", str(plan), "--receipt-json",
                        str(receipt), fmt=fmt)  # fmt: skip
    if case == "foreign_provider":
        receipt = cli.receipt(plan, provider_id="connector:else")
        return cli.fail("evidence", "receipt", "--plan-json", str(plan), "--receipt-json",
                        str(receipt), fmt=fmt)  # fmt: skip
    if case == "unknown_source":
        return cli.fail("evidence", "admit", "--plan-json", str(plan), "--receipt-json",
                        str(cli.receipt(plan)), "--decision", "admit", "--reason", "r",
                        "--admit-source", "https://elsewhere.example/", fmt=fmt)  # fmt: skip
    if case == "provider_not_executable":
        return cli.fail("evidence", "execute", "--plan-json", str(plan), "--execute", fmt=fmt)
    raise AssertionError(case)


REJECTIONS = [
    ("tampered_plan", "request_tampered"),
    ("plan_id_mismatch", "plan_id_mismatch"),
    ("foreign_provider", "foreign_provider"),
    ("unknown_source", "unknown_source"),
    ("provider_not_executable", "provider_not_executable"),
]


@pytest.mark.parametrize(("case", "reason"), REJECTIONS)
def test_contract_rejections_exit_3_with_their_reason_in_json(
    cli: Cli, case: str, reason: str
) -> None:
    code, out = _rejection(cli, "json", case)
    assert code == 3
    assert json.loads(out)["code"] == reason


@pytest.mark.parametrize(("case", "reason"), REJECTIONS)
def test_contract_rejections_exit_3_with_their_reason_in_markdown(
    cli: Cli, case: str, reason: str
) -> None:
    code, out = _rejection(cli, "markdown", case)
    assert code == 3
    assert out.startswith(f"**error** `{reason}` (exit 3): ")


def test_a_readback_blocker_exits_3_and_still_shows_the_projection(cli: Cli) -> None:
    plan = cli.plan()
    receipt = cli.receipt(plan)
    admission = cli.write(
        "admission.json",
        cli.ok("evidence", "admit", "--plan-json", str(plan), "--receipt-json", str(receipt),
               "--decision", "admit", "--reason", "r", "--admit-source", SOURCE),
    )  # fmt: skip
    cli.ok("ledger", "start", "--project", "research", "--question", "Another question")
    code, out = cli.run(
        "evidence", "readback", "--plan-json", str(plan), "--receipt-json", str(receipt),
        "--admission-json", str(admission), "--project", "research", "--execute",
        fmt="markdown",
    )  # fmt: skip
    assert code == 3
    assert "write blocker: question_mismatch" in out
    assert "state: **retained**" in out


def test_a_readback_blocker_exits_3_with_its_reason_in_json(cli: Cli) -> None:
    plan = cli.plan()
    receipt = cli.receipt(plan)
    admission = cli.write(
        "admission.json",
        cli.ok("evidence", "admit", "--plan-json", str(plan), "--receipt-json", str(receipt),
               "--decision", "admit", "--reason", "r", "--admit-source", SOURCE),
    )  # fmt: skip
    code, out = cli.run(
        "evidence", "readback", "--plan-json", str(plan), "--receipt-json", str(receipt),
        "--admission-json", str(admission), "--project", "never-started", "--execute",
    )  # fmt: skip
    assert code == 3
    assert (
        cli.err == "external-query: readback: not every source was written (project_not_started)\n"
    )
    readback = json.loads(out)
    assert readback["ledger"]["write_blockers"] == ["project_not_started"]
    assert readback["ledger"]["written_source_refs"] == []
    assert readback["retirement"]["state"] == "retained"


def test_starting_a_project_with_another_question_is_a_rejection(cli: Cli) -> None:
    cli.ok("ledger", "start", "--project", "research", "--question", OBJECTIVE)
    code, err = cli.fail("ledger", "start", "--project", "research", "--question", "Other")
    assert (code, json.loads(err)["code"]) == (3, "project_question_conflict")


def test_an_unusable_ledger_path_is_an_input_error(cli: Cli) -> None:
    cli.ledger = cli.folder
    code, err = cli.fail("ledger", "start", "--project", "p", "--question", "q")
    assert (code, json.loads(err)["code"]) == (2, "ledger_unavailable")


# -- discover --probe --------------------------------------------------------------------------


def probe_config(cli: Cli, world: World) -> Path:
    """Three configured adapters: one answering, one on a closed port, one switched off."""
    return cli.write(
        "settings.toml",
        f"""
[network]
allowed_networks = ["127.0.0.1/32"]

[[adapters]]
kind = "searxng"
id = "search"
base_url = "{world.base(SEARX)}"

[[adapters]]
kind = "searxng"
id = "down"
base_url = "http://127.0.0.1:{closed_port()}/"

[[adapters]]
kind = "searxng"
id = "off"
enabled = false
base_url = "{world.base(SEARX)}"
""",
    )


def test_discover_probe_asks_every_configured_adapter_and_feeds_plan(
    cli: Cli, loopback: LoopbackServer
) -> None:
    config = probe_config(cli, World(loopback))
    found = cli.ok("evidence", "discover", "--probe", "--config", str(config))
    rows = {row["provider_id"]: row for row in found["providers"]}
    assert set(rows) == {"connector:search", "connector:down", "connector:off", PUBLIC_GITHUB}
    assert (rows["connector:search"]["ready"], rows["connector:search"]["observed_by"]) == (
        True,
        "probe",
    )
    assert rows["connector:down"]["unavailable_reason"] == "connect_failed"
    assert (rows["connector:off"]["enabled"], rows["connector:off"]["ready"]) == (False, False)
    assert rows[PUBLIC_GITHUB]["unavailable_reason"] == "probed_per_repository_at_plan"
    assert len(loopback.requests_to(f"{SEARX}/search")) == 1  # the switched-off one is not asked

    # discover's own output is plan's input: the one adapter that answered is selected.
    inventory = cli.write("providers.json", found)
    plan = cli.ok(*_inventory_plan(inventory))
    assert plan["selected_provider"] == {
        "provider_id": "connector:search",
        "provider_kind": "connector",
        "selected_by": "only_ready",
    }


def test_discover_without_probe_asks_no_one(cli: Cli, loopback: LoopbackServer) -> None:
    config = probe_config(cli, World(loopback))
    found = cli.ok("evidence", "discover", "--config", str(config))
    assert [row["provider_id"] for row in found["providers"]] == [PUBLIC_GITHUB]
    assert found["providers"][0]["unavailable_reason"] == "not_probed"
    assert loopback.requests_to(f"{SEARX}/search") == []


def test_discover_probe_needs_the_settings_that_name_the_adapters(cli: Cli) -> None:
    code, err = cli.fail("evidence", "discover", "--probe")
    assert code == 2
    assert json.loads(err)["code"] == "missing_argument"
    assert "--config required with --probe" in err
