"""Task scripts: ``workflow = TaskScript(build)``, checked statically, run by run-task with
inline inputs and by the MCP server; ``build`` runs once, when the task is first needed."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from external_query_service.errors import InputError, TaskDefinitionError
from external_query_service.testing import LoopbackServer
from external_query_service.toolkit import TaskScript, ToolkitSession, load_script
from external_query_service.toolkit._script import BoundScript
from tests.support.delegation import KEY_ENV, SECRET, WEB_SCRIPT, model_config
from tests.support.llm_chat import ChatServer
from tests.support.paths import REPO
from tests.support.toolkit_tasks import LICENCE, REQUIREMENT, network, run_cli, write

EXAMPLES = REPO / "examples"
RESEARCH = EXAMPLES / "research_task.py"
WORKSPACE = EXAMPLES / "workspace_task.py"
GOAL = "Quote the requirements and the licence."

#: A script that counts its builds in a file next to it (one line per build).
COUNTING = """
from pathlib import Path
from external_query_service.toolkit import EvidenceTask, TaskScript, WebToolkit

def build(inputs):
    with (Path(__file__).parent / "builds.txt").open("a", encoding="utf-8") as log:
        log.write("built\\n")
    return EvidenceTask.from_inputs(
        inputs, toolkits=[WebToolkit(inputs["url"], inputs["allowed_origins"])]
    )

workflow = TaskScript(build, source="web", name="counted")
"""


def inputs(server: LoopbackServer, output: str = "local-results/research.json") -> dict[str, Any]:
    origin = f"http://docs.test:{server.port}"
    return {
        "url": origin + "/",
        "allowed_origins": [origin],
        "markers": {"requirements": REQUIREMENT, "licence": LICENCE},
        "output": output,
    }


def counting_script(folder: Path) -> Path:
    return write(folder / "counted.py", COUNTING)


def builds(folder: Path) -> int:
    log = folder / "builds.txt"
    return len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0


# -- check-task ------------------------------------------------------------------------------


def test_check_task_passes_on_the_research_example_and_shows_its_inputs_schema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(["check-task", str(RESEARCH)], capsys)

    assert code == 0, err
    printed = json.loads(out)
    assert printed["valid"] is True
    assert printed["task"]["name"] == "research"
    assert printed["task"]["source"] == "web"
    schema = printed["inputs_schema"]
    assert schema["required"] == ["markers", "output", "url", "allowed_origins"]
    assert schema["additionalProperties"] is False


def test_check_task_imports_a_script_without_building_it_and_checks_inline_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = counting_script(tmp_path)
    given = {
        "url": "https://docs.example.org/",
        "allowed_origins": ["https://docs.example.org"],
        "markers": {"requirements": REQUIREMENT},
        "output": str(tmp_path / "out.json"),
    }
    code, out, err = run_cli(["check-task", str(script), "--inputs", json.dumps(given)], capsys)

    assert code == 0, err
    assert json.loads(out)["categories"] == ["requirements"]
    assert builds(tmp_path) == 0

    outside = given | {"url": "https://elsewhere.example.org/"}
    code, _, err = run_cli(["check-task", str(script), "--inputs", json.dumps(outside)], capsys)
    assert code == 2
    assert "outside allowed_origins" in err
    assert len(err.strip().splitlines()) == 1
    assert builds(tmp_path) == 0


def test_check_task_validates_the_workspace_example_with_inputs_from_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "corpus" / "a.py", "def check(t):\n    return verify_token(t)\n")
    given = write(
        tmp_path / "inputs.json",
        json.dumps(
            {
                "root": "corpus",
                "queries": ["verify_token"],
                "markers": {"implementation": "return verify_token"},
                "output": "results/ws.json",
            }
        ),
    )
    code, out, err = run_cli(["check-task", str(WORKSPACE), "--inputs-json", str(given)], capsys)
    assert code == 0, err
    assert json.loads(out)["task"]["source"] == "workspace"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"markers": {}}, "markers"),
        ({"markers": {"requirements": " "}}, "marker for 'requirements' is empty"),
        ({"markers": {" ": "x"}}, "label is empty"),
        ({"allowed_origins": []}, "needs url and allowed_origins"),
        ({"root": "corpus"}, "not root/queries"),
        ({"output": "../escape.json"}, "output must stay below"),
        ({"extra": 1}, "extra"),
    ],
)
def test_the_runner_refuses_inputs_that_do_not_fit_before_building(
    tmp_path: Path, docs: LoopbackServer, change: dict[str, Any], message: str
) -> None:
    script = load_script(counting_script(tmp_path))
    with pytest.raises(InputError) as caught:
        script.bind(inputs(docs) | change, base_dir=tmp_path)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert builds(tmp_path) == 0


def test_an_existing_output_is_refused_and_never_overwritten(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    existing = write(tmp_path / "local-results" / "research.json", "mine")
    script = load_script(counting_script(tmp_path))
    with pytest.raises(InputError, match="already exists"):
        script.bind(inputs(docs), base_dir=tmp_path)
    assert existing.read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("x = 1\n", "exports no workflow"),
        ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("def broken(:\n", "SyntaxError"),
        (
            "from external_query_service.toolkit import TaskScript\n"
            "workflow = TaskScript(lambda i: i, source='web', name='bad name!')\n",
            "name",
        ),
    ],
)
def test_a_script_that_cannot_be_used_is_one_line_of_task_definition_error(
    tmp_path: Path, source: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write(tmp_path / "bad.py", source)
    with pytest.raises(TaskDefinitionError) as caught:
        load_script(script)
    assert message in str(caught.value)
    code, _, err = run_cli(["check-task", str(script)], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


# -- build once, lazily ----------------------------------------------------------------------


def test_build_runs_once_on_the_sessions_first_need_of_the_task(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    script = load_script(counting_script(tmp_path))
    bound = script.bind(
        inputs(docs, str(tmp_path / "out.json")), base_dir=tmp_path, network=network()
    )
    session = bound.session()
    assert builds(tmp_path) == 0
    assert session.delegation_status().reason == "no_model"  # known without building
    assert builds(tmp_path) == 0

    first = session.observe()
    assert builds(tmp_path) == 1
    assert [tool.name for tool in first.tools][:2] == ["web.open_link", "web.read_section"]
    entry = session.arguments("web.open_link", first.state_ref).domains[0].options[0].id
    outcome = asyncio.run(session.operate("web.open_link", {"link": entry}, first.state_ref))
    assert outcome.ok
    session.observe()
    asyncio.run(session.aclose())
    assert builds(tmp_path) == 1
    assert bound.builds == 1


def test_a_build_that_returns_no_task_is_refused(tmp_path: Path, docs: LoopbackServer) -> None:
    script = TaskScript(lambda _inputs: "not a task", source="web")  # type: ignore[arg-type, return-value]
    bound = script.bind(inputs(docs), base_dir=tmp_path)
    with pytest.raises(TaskDefinitionError, match="not an EvidenceTask"):
        ToolkitSession(build=bound.task).observe()


# -- run-task and the MCP server -------------------------------------------------------------


def test_run_task_runs_the_research_example_with_inline_inputs_to_a_matching_receipt(
    tmp_path: Path,
    docs: LoopbackServer,
    chat: ChatServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    chat.then(*WEB_SCRIPT)
    monkeypatch.chdir(tmp_path)
    argv = [
        "run-task",
        str(RESEARCH),
        "--goal",
        GOAL,
        "--inputs",
        json.dumps(inputs(docs)),
        "--config",
        str(model_config(tmp_path, chat)),
        "--max-steps",
        "20",
        "--timeout",
        "60",
        "--archive",
        str(tmp_path / "steps.jsonl"),
    ]
    code, out, err = run_cli(argv, capsys)

    assert code == 0, err
    printed = json.loads(out)
    assert printed["delegation"]["status"] == "completed"
    assert printed["delegation"]["cost"]["refusals"] == 0
    assert printed["delegation"]["cost"]["steps"] == 6
    receipt = printed["receipt"]
    report = tmp_path / "local-results" / "research.json"
    assert receipt["path"] == str(report.resolve())
    assert receipt["exists"] is True
    assert receipt["matches"] is True
    assert receipt["digest"] == "sha256:" + hashlib.sha256(report.read_bytes()).hexdigest()
    assert receipt["record_count"] == 2
    saved = json.loads(report.read_text(encoding="utf-8"))
    assert saved["task"]["name"] == "research"
    assert all(check["passed"] for check in saved["checks"])

    # The same output again is refused before anything is fetched or asked.
    asked = len(chat.bodies)
    code, _, err = run_cli(argv, capsys)
    assert code == 2
    assert "already exists" in err
    assert len(chat.bodies) == asked


def test_run_task_takes_the_inputs_one_way_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = write(tmp_path / "inputs.json", "{}")
    code, _, err = run_cli(
        ["run-task", str(RESEARCH), "--inputs", "{}", "--inputs-json", str(given)], capsys
    )
    assert code == 2
    assert "one way" in err
    code, _, err = run_cli(["run-task", str(RESEARCH), "--policy", "walk"], capsys)
    assert code == 2
    assert "inputs are missing" in err
    code, _, err = run_cli(["run-task", str(RESEARCH), "--inputs", "[1]"], capsys)
    assert code == 2
    assert "JSON object" in err


def test_the_mcp_server_runs_the_same_script_and_builds_it_once(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from tests.support.mcp_client import server_params, structured

    chat.then(*WEB_SCRIPT)
    script = counting_script(tmp_path)
    given = inputs(docs, str(tmp_path / "mcp-report.json"))
    params = server_params(
        "--config",
        str(model_config(tmp_path, chat, key_env=KEY_ENV)),
        "--task",
        str(script),
        "--inputs",
        json.dumps(given),
    ).model_copy(update={"env": {KEY_ENV: SECRET}})

    async def session() -> tuple[set[str], list[str], dict[str, Any], dict[str, Any]]:
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            listed = {tool.name for tool in tools}
            operate = next(tool for tool in tools if tool.name == "operate")
            enum = operate.input_schema["properties"]["tool"]["enum"]
            result = structured(await client.call_tool("run_task", {"goal": GOAL}))
            after = structured(await client.call_tool("observe", {}))
            return listed, enum, result, after

    listed, enum, result, after = asyncio.run(session())
    assert "run_task" in listed
    assert "delegate" not in listed
    assert "web.open_link" in enum
    assert not {"web.open", "web.follow", "evidence.record", "report.save"} & set(enum)
    names = {tool["name"] for tool in after["tools"]}
    assert {"web.open_link", "read_evidence", "evidence_page", "save_report"} <= names
    assert not {"web.open", "web.follow", "evidence.read", "report.save"} & names
    assert result["status"] == "completed", result["stopped_because"]
    assert result["receipt"]["matches"] is True
    assert result["receipt"]["path"] == str((tmp_path / "mcp-report.json").resolve())
    assert after["receipt"]["digest"] == result["receipt"]["digest"]
    assert after["tools"][0]["name"] == "web.open_link"
    assert builds(tmp_path) == 1


def test_a_bound_script_keeps_the_store_the_runner_shares(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    bound = load_script(RESEARCH).bind(inputs(docs), base_dir=tmp_path)
    assert isinstance(bound, BoundScript)
    session = bound.session()
    before = session.store
    assert session.task is not None
    assert session.store is before


def test_run_task_walks_the_workspace_example_without_a_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "corpus" / "src" / "auth.py", "def check(t):\n    return verify_token(t)\n")
    monkeypatch.chdir(tmp_path)
    given = {
        "root": "corpus",
        "queries": ["verify_token"],
        "markers": {"implementation": "return verify_token"},
        "output": "local-results/workspace.json",
    }
    argv = ["run-task", str(WORKSPACE), "--inputs", json.dumps(given), "--policy", "walk"]
    code, out, err = run_cli(argv, capsys)

    assert code == 0, err
    printed = json.loads(out)
    assert printed["receipt"]["matches"] is True
    assert printed["receipt"]["sources"] == ["workspace:src/auth.py"]
    assert printed["collection"]["searches"] == 1
    saved = json.loads((tmp_path / "local-results" / "workspace.json").read_text("utf-8"))
    assert saved["task"]["name"] == "workspace-investigation"
    assert "return verify_token(t)" in saved["records"][0]["quote"]
