"""The MCP server over stdio, driven by the SDK's own client against a loopback world."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from external_query_service import ExternalQueryService, Settings
from external_query_service.cli import main
from external_query_service.server.mcp import build_server
from external_query_service.testing import LoopbackServer
from external_query_service.toolkit import ToolkitSession
from tests.support.toolkit_tasks import REQUIREMENT, serve_docs, web_task, write
from tests.support.world import PORT_QUESTION, World, serve_port_news

mcp = pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from tests.support.mcp_client import (  # noqa: E402
    TOOLS,
    error_text,
    server_params,
    settings_file,
    structured,
)

QUESTION = PORT_QUESTION


def serve_world(loopback: LoopbackServer) -> World:
    world = World(loopback)
    serve_port_news(world, QUESTION)
    return world


def test_the_stdio_server_lists_its_tools_answers_and_refuses_stale_state_refs(
    tmp_path: Path, loopback: LoopbackServer
) -> None:
    world = serve_world(loopback)
    params = server_params("--config", str(settings_file(tmp_path, world)))

    async def session() -> None:
        async with Client(params) as client:
            listed = await client.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS
            before = structured(await client.call_tool("observe", {}))
            assert before["capture_count"] == 0

            answer = structured(await client.call_tool("answer", {"question": QUESTION}))
            assert answer["status"] == "answered"
            assert answer["route_mode"] == "external"
            assert answer["text"].startswith("外部实时查询：")
            evidence = next(item for item in answer["evidence"] if item["basis"] == "page_body")

            window = structured(
                await client.call_tool(
                    "read_evidence", {"ref": evidence["ref"], "offset": evidence["offset"]}
                )
            )
            assert window["text"].startswith(evidence["snippet"])
            assert len(window["text"]) <= 1200

            # The answer added captures: the state_ref observed before it is stale now.
            stale = await client.call_tool(
                "arguments", {"tool": "evidence.read", "state_ref": before["state_ref"]}
            )
            assert "is stale" in error_text(stale)

            seen = structured(await client.call_tool("observe", {}))
            assert seen["capture_count"] >= 1
            state = seen["state_ref"]
            refs = structured(
                await client.call_tool("arguments", {"tool": "evidence.read", "state_ref": state})
            )
            ref_id = refs["domains"][0]["options"][0]["id"]
            offsets = structured(
                await client.call_tool(
                    "arguments",
                    {"tool": "evidence.read", "state_ref": state, "parent": {"ref": ref_id}},
                )
            )
            chosen = {"ref": ref_id, "offset": offsets["domains"][0]["options"][0]["id"]}
            done = structured(
                await client.call_tool(
                    "operate", {"tool": "evidence.read", "arguments": chosen, "state_ref": state}
                )
            )
            assert done["ok"] is True
            assert done["state_ref"] != state

            again = await client.call_tool(
                "operate", {"tool": "evidence.read", "arguments": chosen, "state_ref": state}
            )
            assert "already used" in error_text(again)
            unknown = await client.call_tool(
                "arguments", {"tool": "evidence.read", "state_ref": "state:9:nonsense"}
            )
            assert "never issued" in error_text(unknown)

    asyncio.run(session())
    assert len(loopback.requests_to("/throughput", host="port-news.test")) == 1


def test_the_stdio_server_drives_a_web_task_with_state_refs(
    tmp_path: Path, loopback: LoopbackServer
) -> None:
    serve_docs(loopback)
    world = serve_world(loopback)
    inputs = write(
        tmp_path / "inputs.json",
        json.dumps(
            {
                "url": f"http://docs.test:{loopback.port}/",
                "allowed_origins": [f"http://docs.test:{loopback.port}"],
                "markers": {"requirements": REQUIREMENT},
                "output": "mcp.json",
            }
        ),
    )
    params = server_params(
        "--config",
        str(settings_file(tmp_path, world)),
        "--task",
        str(web_task(tmp_path)),
        "--inputs-json",
        str(inputs),
    )

    async def operate(client: Client, tool: str, pick: dict[str, str]) -> dict[str, Any]:
        state = structured(await client.call_tool("observe", {}))["state_ref"]
        chosen: dict[str, str] = {}
        for parameter, label in pick.items():
            parent = {"category": chosen["category"]} if parameter == "passage" else None
            offered = structured(
                await client.call_tool(
                    "arguments", {"tool": tool, "state_ref": state, "parent": parent}
                )
            )
            domain = next(d for d in offered["domains"] if d["parameter"] == parameter)
            chosen[parameter] = next(o["id"] for o in domain["options"] if label in o["label"])
        return structured(
            await client.call_tool(
                "operate", {"tool": tool, "arguments": chosen, "state_ref": state}
            )
        )

    async def session() -> dict[str, Any]:
        async with Client(params) as client:
            opened = await operate(client, "web.open", {"url": "/"})
            assert opened["ok"] is True
            followed = await operate(client, "web.follow", {"link": "/guide"})
            assert followed["result"]["final_url"].endswith("/guide")
            await operate(client, "evidence.record", {"category": "", "passage": REQUIREMENT})
            saved = await operate(client, "report.save", {})
            assert saved["result"]["matches"] is True
            return structured(await client.call_tool("observe", {}))

    seen = asyncio.run(session())
    assert seen["checks"][0]["passed"] is True
    assert seen["receipt"]["exists"] is True
    report = json.loads((tmp_path / "reports" / "mcp.json").read_text(encoding="utf-8"))
    assert REQUIREMENT in report["records"][0]["quote"]


def test_without_the_mcp_package_the_server_fails_with_an_install_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [name for name in sys.modules if name == "mcp" or name.startswith("mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)
    code = main(["mcp"])
    err = capsys.readouterr().err
    assert code == 2
    assert "pip install 'external_query_service[mcp]'" in err


def test_the_core_library_and_the_toolkit_import_without_the_mcp_package() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import external_query_service, external_query_service.toolkit\n"
        "import external_query_service.server.mcp, external_query_service.cli.toolkit\n"
        "from external_query_service.cli import build_parser; build_parser()\n"
        "assert sys.modules['mcp'] is None\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_read_evidence_pages_through_a_capture_and_names_what_it_refuses() -> None:
    session = ToolkitSession()
    text = "".join(f"第{n}条证据。" for n in range(600))
    ref = session.store.put(text, source="https://example.test/")

    async def run() -> None:
        async with (
            ExternalQueryService(Settings(), store=session.store) as service,
            Client(build_server(session, service)) as client,
        ):
            pieces: list[str] = []
            offset: int | None = 0
            while offset is not None:
                window = structured(
                    await client.call_tool("read_evidence", {"ref": ref, "offset": offset})
                )
                assert len(window["text"]) <= 1200
                pieces.append(window["text"])
                offset = window["next_offset"]
            assert "".join(pieces) == text

            unknown = await client.call_tool("read_evidence", {"ref": "ev:nothing"})
            assert "unknown evidence reference" in error_text(unknown)
            negative = await client.call_tool("read_evidence", {"ref": ref, "offset": -1})
            assert "greater than or equal to 0" in error_text(negative)
            too_long = await client.call_tool("read_evidence", {"ref": ref, "limit": 10_000})
            assert "less than or equal to 1200" in error_text(too_long)
            bad = await client.call_tool(
                "answer", {"question": "x", "semantics": {"query_kind": 5}}
            )
            assert "query_kind" in error_text(bad)

    asyncio.run(run())


def test_mcp_docs_answers_from_the_folder(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "verifier.md").write_text(
        "# Verifier\n\nThe verifier checks the origin of every source and the time range.\n",
        encoding="utf-8",
    )
    params = server_params("--docs", str(docs))

    async def session() -> dict[str, Any]:
        async with Client(params) as client:
            return structured(
                await client.call_tool(
                    "answer",
                    {
                        "question": "What does the verifier check?",
                        "semantics": {"query_kind": "documentation"},
                    },
                )
            )

    answer = asyncio.run(session())
    assert answer["status"] == "answered"
    assert answer["sources"][0]["url"] == "docs://docs/verifier.md"


def test_mcp_docs_naming_no_folder_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "--docs", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == (
        f"external-query: error: --docs: not a folder: {tmp_path / 'missing'}\n"
    )
