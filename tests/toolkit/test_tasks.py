"""Evidence tasks: task files, runtime inputs, collection without a model, saved reports."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from external_query_service.cli import build_parser
from external_query_service.errors import InputError
from external_query_service.testing import LoopbackServer
from external_query_service.toolkit import (
    BoundaryRefused,
    EvidenceTask,
    TaskSpec,
    ToolkitError,
    load_task,
)
from external_query_service.toolkit import _operations as operations
from tests.support.paths import REPO
from tests.support.toolkit_tasks import (
    REQUIREMENT,
    make_task,
    run_cli,
    web_inputs,
    web_inputs_static,
    web_task,
    write,
)
from tests.support.world import NOW

MCP_DOC = REPO / "docs" / "mcp_server.md"


def inputs(folder: Path, data: dict[str, Any], name: str = "inputs.json") -> Path:
    return write(folder / name, json.dumps(data, ensure_ascii=False))


def config(folder: Path) -> Path:
    return write(
        folder / "settings.toml",
        '[network]\nallowed_networks = ["127.0.0.1/32"]\ntimeout_s = 5.0\n'
        '[network.resolve]\n"docs.test" = "127.0.0.1"\n"other.test" = "127.0.0.1"\n',
    )


def collected(task: EvidenceTask) -> EvidenceTask:
    async def go() -> None:
        try:
            await task.collect()
        finally:
            await task.aclose()

    asyncio.run(go())
    return task


# -- static checks -------------------------------------------------------------------------


def test_check_task_accepts_a_valid_task_and_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = web_task(tmp_path)
    given = inputs(tmp_path, web_inputs_static())
    code, out, err = run_cli(["check-task", str(task), "--inputs-json", str(given)], capsys)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["valid"] is True
    assert summary["categories"] == ["licence", "requirements"]
    assert summary["inputs_digest"].startswith("sha256:")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"markers": {}}, "markers"),
        ({"markers": {"requirements": "  "}}, "marker for 'requirements' is empty"),
        ({"markers": ["requirements"]}, "markers"),
        ({"output": "../escape.json"}, "output must stay inside the reports folder"),
        ({"output": "/tmp/abs.json"}, "output must stay inside the reports folder"),
        ({"url": "https://evil.example/"}, "outside allowed_origins"),
        ({"allowed_origins": ["https://docs.example.org/path"]}, "no path"),
        ({"allowed_origins": []}, "needs url and allowed_origins"),
        ({"root": "."}, "not root/queries"),
        ({"extra": 1}, "unknown key"),
        ({"session": "research"}, "session and tab are for a browser task only"),
        ({"session": "research", "tab": "mine"}, "session and tab are for a browser task only"),
    ],
)
def test_check_task_rejects_bad_inputs_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], message: str
) -> None:
    data = web_inputs_static() | change
    code, out, err = run_cli(
        ["check-task", str(web_task(tmp_path)), "--inputs-json", str(inputs(tmp_path, data))],
        capsys,
    )
    assert code == 2
    assert out == ""
    assert message in err
    assert err.count("\n") == 1


def browser_task_file(folder: Path) -> Path:
    return write(
        folder / "browser.toml", 'name = "b"\nsource = "browser"\nreports_dir = "reports"\n'
    )


def test_a_browser_task_takes_the_callers_session_and_tab_as_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = browser_task_file(tmp_path)
    placed = web_inputs_static() | {"session": "research", "tab": "mine"}
    digests = []
    for data, name in ((placed, "placed.json"), (web_inputs_static(), "plain.json")):
        code, out, err = run_cli(
            ["check-task", str(task), "--inputs-json", str(inputs(tmp_path, data, name))], capsys
        )
        assert code == 0, err
        digests.append(json.loads(out)["inputs_digest"])
    assert digests[0] == digests[1]  # where pages render is not what the task is
    lone_tab = web_inputs_static() | {"tab": "mine"}
    code, _out, err = run_cli(
        ["check-task", str(task), "--inputs-json", str(inputs(tmp_path, lone_tab, "t.json"))],
        capsys,
    )
    assert (code, err) == (2, "external-query: error: inputs: a tab needs its session\n")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('name = "x"\nsource = "ftp"\nreports_dir = "r"\n', "source"),
        ('name = "x"\nsource = "web"\n', "reports_dir"),
        ('name = "x"\nsource = "web"\nreports_dir = "../up"\n', "reports_dir must stay below"),
        ('name = "x"\nsource = "web"\nreports_dir = "r"\nrequired = []\n', "required"),
        ('name = "x"\nsource = "web"\nreports_dir = "r"\nbogus = 1\n', "unknown key"),
        ("name = \n", "invalid TOML"),
    ],
)
def test_check_task_rejects_bad_task_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, message: str
) -> None:
    code, _, err = run_cli(["check-task", str(write(tmp_path / "t.toml", body))], capsys)
    assert code == 2
    assert message in err


@pytest.mark.parametrize("value", ["true", '"10"', "10.0"])
def test_task_budgets_take_integers_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    body = f'name = "x"\nsource = "web"\nreports_dir = "r"\n[budget]\nmax_pages = {value}\n'
    code, _, err = run_cli(["check-task", str(write(tmp_path / "t.toml", body))], capsys)
    assert code == 2
    assert "max_pages" in err


def test_a_json_task_file_is_read_like_a_toml_one(tmp_path: Path) -> None:
    path = write(
        tmp_path / "task.json",
        json.dumps({"name": "w", "source": "workspace", "reports_dir": "out"}),
    )
    spec, folder = load_task(path)
    assert spec == TaskSpec(name="w", source="workspace", reports_dir="out")
    assert folder == tmp_path.resolve()


def test_required_categories_must_have_markers(tmp_path: Path) -> None:
    spec, task_dir = load_task(web_task(tmp_path, required='["requirements", "security"]'))
    with pytest.raises(InputError, match="security"):
        EvidenceTask(spec, web_inputs_static(), task_dir=task_dir)


# -- collecting and saving -----------------------------------------------------------------


def test_collecting_crawls_observed_links_inside_the_origins_and_records_marked_passages(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    task = collected(make_task(tmp_path, docs))

    records = task.records()
    assert {record.category for record in records} == {"requirements", "licence"}
    for record in records:
        assert task.store.quote(record.ref, record.offset, record.length) == record.quote
        assert task.markers[record.category] in record.quote
    assert {record.source for record in records} == {
        f"http://docs.test:{docs.port}/guide",
        f"http://docs.test:{docs.port}/licence",
    }
    assert [check.passed for check in task.checks()] == [True, True]
    assert docs.requests_to("/x", host="other.test") == []
    assert len(docs.requests_to("/missing")) == 1  # observed, inside: tried once, failed


def test_the_saved_report_holds_task_inputs_records_checks_sources_and_time(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    task = collected(make_task(tmp_path, docs))
    receipt = task.save()

    saved = (tmp_path / "reports" / "run-1.json").read_bytes()
    report = json.loads(saved)
    assert set(report) == {
        "task",
        "inputs_digest",
        "records",
        "checks",
        "sources",
        "created_at",
    }
    assert report["task"]["name"] == "docs-requirements"
    assert report["inputs_digest"] == task.inputs_digest
    assert report["created_at"] == NOW.isoformat()
    assert set(report["records"][0]) == {"category", "ref", "offset", "length", "quote", "source"}
    assert all(check["passed"] is True for check in report["checks"])
    assert receipt.exists is True
    assert receipt.matches is True
    assert receipt.record_count == len(report["records"])
    assert receipt.digest == "sha256:" + hashlib.sha256(saved).hexdigest()
    assert receipt.sources == tuple(source["source"] for source in report["sources"])


def test_a_tampered_saved_report_shows_matches_false(tmp_path: Path, docs: LoopbackServer) -> None:
    task = collected(make_task(tmp_path, docs))
    task.save()
    path = tmp_path / "reports" / "run-1.json"
    path.write_bytes(path.read_bytes().replace(b'"passed": true', b'"passed": false', 1))

    receipt = task.artifact_receipt()
    assert receipt.exists is True
    assert receipt.matches is False


def test_a_report_whose_output_exists_is_refused_and_left_alone(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    existing = write(tmp_path / "reports" / "run-1.json", "keep me")
    task = collected(make_task(tmp_path, docs))
    with pytest.raises(BoundaryRefused) as caught:
        task.save()
    assert caught.value.reason == "output_exists"
    assert existing.read_text(encoding="utf-8") == "keep me"
    assert task.artifact_receipt().matches is False


def test_a_symlinked_folder_inside_the_reports_folder_is_not_written_through(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "sub").symlink_to(elsewhere, target_is_directory=True)
    task = make_task(tmp_path, docs, output="sub/run.json")
    with pytest.raises(BoundaryRefused) as caught:
        task.save()
    assert caught.value.reason == "symlink_refused"
    assert list(elsewhere.iterdir()) == []


def test_a_symlinked_reports_folder_is_not_written_through(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "reports").symlink_to(elsewhere, target_is_directory=True)
    task = make_task(tmp_path, docs)
    with pytest.raises(BoundaryRefused) as caught:
        task.save()
    assert caught.value.reason == "symlink_refused"
    assert list(elsewhere.iterdir()) == []
    assert task.artifact_receipt().exists is False


def test_the_reports_folder_is_made_on_save_not_before(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    task = make_task(tmp_path, docs, output="nested/run.json")
    assert not (tmp_path / "reports").exists()
    receipt = task.save()
    assert receipt.path == str(tmp_path.resolve() / "reports" / "nested" / "run.json")
    assert receipt.exists is True
    assert receipt.matches is True


def test_a_required_category_without_a_marked_passage_fails_its_check(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    task = collected(
        make_task(tmp_path, docs, markers={"requirements": REQUIREMENT, "security": "漏洞报告流程"})
    )
    checks = {check.category: check for check in task.checks()}
    assert checks["requirements"].passed is True
    assert checks["security"].passed is False
    assert checks["security"].reason == "no_record"


def test_recording_a_passage_without_the_marker_is_refused(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    task = collected(make_task(tmp_path, docs))
    licence_ref = next(r.ref for r in task.records() if r.category == "licence")
    passage = next(
        p
        for p in task.store.passage_options(licence_ref)
        if REQUIREMENT not in task.store.quote(p.ref, p.offset, p.length)
    )
    with pytest.raises(ToolkitError) as caught:
        task.record("requirements", passage.passage_id)
    assert caught.value.reason == "marker_not_in_passage"


def test_run_task_collects_saves_and_prints_the_receipt(
    tmp_path: Path, docs: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    task = web_task(tmp_path)
    given = inputs(tmp_path, web_inputs(docs))
    argv = ["run-task", str(task), "--inputs-json", str(given), "--config", str(config(tmp_path))]
    code, out, err = run_cli([*argv, "--now", NOW.isoformat()], capsys)
    assert code == 0, err
    printed = json.loads(out)
    assert printed["receipt"]["matches"] is True
    assert printed["collection"]["pages"] == 4  # index, guide, missing (404), licence
    assert [failure["reason"] for failure in printed["collection"]["failures"]] == [
        "upstream_status"
    ]
    saved = json.loads((tmp_path / "reports" / "run-1.json").read_text(encoding="utf-8"))
    assert len(saved["records"]) == printed["receipt"]["record_count"] > 0

    again, _, err = run_cli(argv, capsys)
    assert again == 2
    assert "already exists" in err


def test_run_task_exits_3_when_a_required_category_is_not_backed(
    tmp_path: Path, docs: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    given = inputs(tmp_path, web_inputs(docs, markers={"security": "漏洞报告流程"}))
    code, out, _ = run_cli(
        [
            "run-task",
            str(web_task(tmp_path)),
            "--inputs-json",
            str(given),
            "--config",
            str(config(tmp_path)),
        ],
        capsys,
    )
    assert code == 3
    assert json.loads(out)["checks"][0]["passed"] is False
    assert (tmp_path / "reports" / "run-1.json").exists()


def test_a_workspace_task_searches_its_queries_and_records_marked_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "corpus" / "src" / "auth.py", "def check():\n    return verify_token(t)\n")
    write(tmp_path / "corpus" / "README.md", "# Auth\n\nTokens are checked by verify_token.\n")
    task = write(
        tmp_path / "ws.toml", 'name = "ws"\nsource = "workspace"\nreports_dir = "reports"\n'
    )
    given = inputs(
        tmp_path,
        {
            "root": "corpus",
            "queries": ["verify_token"],
            "markers": {"implementation": "return verify_token"},
            "output": "ws.json",
        },
    )
    code, out, err = run_cli(["run-task", str(task), "--inputs-json", str(given)], capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "reports" / "ws.json").read_text(encoding="utf-8"))
    assert [record["source"] for record in report["records"]] == ["workspace:src/auth.py"]
    assert "return verify_token" in report["records"][0]["quote"]
    assert json.loads(out)["collection"]["searches"] == 1


def test_run_task_refuses_a_symlinked_reports_folder_as_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "corpus" / "a.py", "return verify_token(t)\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "reports").symlink_to(elsewhere, target_is_directory=True)
    task = write(
        tmp_path / "ws.toml", 'name = "ws"\nsource = "workspace"\nreports_dir = "reports"\n'
    )
    given = inputs(
        tmp_path, {"root": "corpus", "markers": {"impl": "verify_token"}, "output": "ws.json"}
    )
    code, out, err = run_cli(["run-task", str(task), "--inputs-json", str(given)], capsys)
    assert code == 2
    assert out == ""
    assert "symlink" in err
    assert list(elsewhere.iterdir()) == []


# -- docs ------------------------------------------------------------------------------------


def test_the_toolkit_doc_names_every_command_flag_tool_and_operation() -> None:
    doc = (REPO / "docs" / "architecture" / "toolkit.md").read_text(encoding="utf-8")
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in ("check-task", "run-task", "mcp"):
        assert f"external-query {name}" in doc, name
        flags = [
            option
            for action in commands[name]._actions
            for option in action.option_strings
            if option.startswith("--") and option != "--help"
        ]
        assert [flag for flag in flags if flag not in doc] == [], name
    names = (*operations.TOOL_NAMES, *operations.ALIASES)
    assert [name for name in names if f"`{name}`" not in doc] == []
    tools = ("observe", "arguments", "operate", "run_task", "delegate", "answer", "read_evidence")
    for tool in tools:
        assert f"`{tool}`" in doc, tool

    reference = MCP_DOC.read_text(encoding="utf-8").split("## MCP server", 1)[1]
    snippet = re.search(r"```json\n(.*?)```", reference, flags=re.DOTALL)
    assert snippet is not None
    server = json.loads(snippet.group(1))["mcpServers"]["external-query"]
    assert server["command"] == "external-query"
    assert server["args"][:2] == ["mcp", "--config"]
