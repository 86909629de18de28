"""run_task over MCP: the SDK's client hands a task to a scripted loopback model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from external_query_service import ExternalQueryService, Settings
from external_query_service.llm import ChatCompletionsClient
from external_query_service.server.mcp import MAX_DELEGATED_STEPS, build_server
from external_query_service.testing import LoopbackServer
from external_query_service.toolkit import ToolkitSession
from external_query_service.toolkit._delegate import MAX_GOAL_CHARS
from tests.support.delegation import KEY_ENV, SECRET, WEB_SCRIPT, archived, model_config
from tests.support.llm_chat import ChatServer
from tests.support.toolkit_tasks import make_task, serve_docs, web_inputs, web_task, write

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import stdio_client

from tests.support.mcp_client import TOOLS, error_text, server_params, structured

GOAL = "Quote the requirements and the licence."


@pytest.fixture
def docs(loopback: LoopbackServer) -> LoopbackServer:
    return serve_docs(loopback)


def task_params(folder: Path, docs: LoopbackServer, chat: ChatServer, *extra: str) -> Any:
    given = write(folder / "inputs.json", json.dumps(web_inputs(docs)))
    params = server_params(
        "--config",
        str(model_config(folder, chat, key_env=KEY_ENV)),
        "--task",
        str(web_task(folder)),
        "--inputs-json",
        str(given),
        *extra,
    )
    return params.model_copy(update={"env": {KEY_ENV: SECRET}})


def test_the_sdk_client_drives_run_task_over_stdio_to_a_saved_report(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(*WEB_SCRIPT)
    archive = tmp_path / "steps.jsonl"
    params = task_params(tmp_path, docs, chat, "--archive", str(archive))
    stderr = tmp_path / "stderr.txt"

    async def session() -> tuple[dict[str, Any], dict[str, Any], str]:
        with stderr.open("w", encoding="utf-8") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                listed = {tool.name for tool in (await client.list_tools()).tools}
                assert listed == TOOLS | {"run_task"}
                before = structured(await client.call_tool("observe", {}))
                assert before["delegation"] == {
                    "ready": True,
                    "reason": None,
                    "route": None,
                    "goal": None,
                    "status": None,
                }
                done = await client.call_tool("run_task", {"goal": GOAL, "max_steps": 10})
                result = structured(done)
                after = structured(await client.call_tool("observe", {}))
                refused = await client.call_tool(
                    "operate",
                    {"tool": "report.save", "arguments": {}, "state_ref": after["state_ref"]},
                )
                return result, after, error_text(refused)

    result, after, refused = asyncio.run(session())
    assert result["status"] == "completed", result["stopped_because"]
    assert result["budget"]["max_steps"] == 10
    assert result["receipt"]["matches"] is True
    assert result["artifact"] == result["receipt"]  # the design's name; receipt kept
    assert result["cost"]["steps"] == 6
    assert after["delegation"]["route"] == "delegated"
    assert after["delegation"]["goal"] == GOAL
    assert after["delegation"]["status"] == "completed"
    assert after["receipt"]["digest"] == result["receipt"]["digest"]
    assert "route_taken" in refused
    assert json.loads((tmp_path / "reports" / "run-1.json").read_text(encoding="utf-8"))
    lines = archived(archive)
    assert [line["event"] for line in lines] == ["start", *["turn"] * 6, "end"]
    shown = (archive.read_text(encoding="utf-8"), stderr.read_text(encoding="utf-8"))
    for text in (*shown, json.dumps(result), json.dumps(after)):
        assert SECRET not in text
    assert chat.requests_to("/v1/chat/completions")[0].headers["authorization"] == (
        f"Bearer {SECRET}"
    )


def test_direct_only_hides_run_task_and_says_why_delegation_is_not_ready(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    params = task_params(tmp_path, docs, chat, "--direct-only")

    async def session() -> tuple[set[str], dict[str, Any], str, str]:
        async with Client(params) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            seen = structured(await client.call_tool("observe", {}))
            run = await client.call_tool("run_task", {"goal": GOAL})
            alias = await client.call_tool("delegate", {"goal": GOAL})
            return listed, seen, error_text(run), error_text(alias)

    listed, seen, run, alias = asyncio.run(session())
    assert listed == TOOLS
    assert seen["delegation"]["ready"] is False
    assert seen["delegation"]["reason"] == "direct_only"
    assert "Unknown tool: run_task" in run
    assert "Unknown tool: delegate" in alias
    assert chat.bodies == []


def test_the_delegate_alias_is_callable_but_not_listed(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(*WEB_SCRIPT)
    session = ToolkitSession(
        make_task(tmp_path, docs), model=ChatCompletionsClient(chat.settings())
    )

    async def run() -> dict[str, Any]:
        async with (
            ExternalQueryService(Settings(), store=session.store) as service,
            Client(build_server(session, service)) as client,
        ):
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert "delegate" not in listed
            schema = listed["run_task"].input_schema
            assert schema["required"] == ["goal"]
            assert schema["properties"]["goal"]["maxLength"] == MAX_GOAL_CHARS
            steps = schema["properties"]["max_steps"]["anyOf"][0]
            assert (steps["minimum"], steps["maximum"]) == (1, MAX_DELEGATED_STEPS)
            annotations = listed["run_task"].annotations
            assert annotations is not None
            assert (annotations.read_only_hint, annotations.destructive_hint) == (False, False)
            assert annotations.open_world_hint is True
            too_many = await client.call_tool(
                "run_task", {"goal": GOAL, "max_steps": MAX_DELEGATED_STEPS + 1}
            )
            assert "less than or equal to 500" in error_text(too_many)
            return structured(await client.call_tool("delegate", {"goal": GOAL}))

    result = asyncio.run(run())
    assert result["status"] == "completed"
    asyncio.run(session.aclose())


def test_run_task_after_a_direct_operation_is_a_tool_error_naming_the_route(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    session = ToolkitSession(
        make_task(tmp_path, docs), model=ChatCompletionsClient(chat.settings())
    )

    async def run() -> str:
        async with (
            ExternalQueryService(Settings(), store=session.store) as service,
            Client(build_server(session, service)) as client,
        ):
            state = structured(await client.call_tool("observe", {}))["state_ref"]
            offered = structured(
                await client.call_tool("arguments", {"tool": "web.open", "state_ref": state})
            )
            url = offered["domains"][0]["options"][0]["id"]
            opened = structured(
                await client.call_tool(
                    "operate", {"tool": "web.open", "arguments": {"url": url}, "state_ref": state}
                )
            )
            assert opened["ok"] is True
            return error_text(await client.call_tool("run_task", {"goal": GOAL}))

    message = asyncio.run(run())
    asyncio.run(session.aclose())
    assert "route_taken: this session already operates directly (1 operation)" in message
    assert "\n" not in message
    assert chat.bodies == []


def test_without_a_model_run_task_is_not_offered_and_observe_says_why(
    tmp_path: Path, docs: LoopbackServer
) -> None:
    session = ToolkitSession(make_task(tmp_path, docs))

    async def run() -> tuple[set[str], dict[str, Any], str]:
        async with (
            ExternalQueryService(Settings(), store=session.store) as service,
            Client(build_server(session, service)) as client,
        ):
            listed = {tool.name for tool in (await client.list_tools()).tools}
            seen = structured(await client.call_tool("observe", {}))
            return listed, seen, error_text(await client.call_tool("run_task", {"goal": GOAL}))

    listed, seen, refused = asyncio.run(run())
    asyncio.run(session.aclose())
    assert listed == TOOLS
    assert (seen["delegation"]["ready"], seen["delegation"]["reason"]) == (False, "no_model")
    assert "Unknown tool: run_task" in refused
    assert docs.requests == []
