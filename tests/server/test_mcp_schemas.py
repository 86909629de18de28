"""What an MCP client sees of the server: described, typed, annotated tools; a readable
answer text beside the full structured model; and no fetched URL on the server's stderr."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from external_query_service import (
    Adapter,
    AdapterOutcome,
    ExternalQueryService,
    Settings,
    register_adapter,
)
from external_query_service._evidence_store import MAX_READ_CHARS
from external_query_service.models import CORE_QUERY_KINDS, ExternalQueryPlan, ProviderType
from external_query_service.server.mcp import build_server
from external_query_service.testing import LoopbackServer
from external_query_service.toolkit import ToolkitSession
from external_query_service.toolkit._operations import TOOL_NAMES
from tests.support.world import PORT_QUESTION as QUESTION
from tests.support.world import World, article, hit

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.types import Tool

from tests.support.mcp_client import TOOLS, error_text, server_params, settings_file, structured

SITES = ("port-news.test", "gov-port.test", "ship-daily.test")
READ_ONLY = {"observe", "arguments", "answer", "read_evidence"}


def serve_three_sources(loopback: LoopbackServer) -> World:
    """One search result page per site, each with the throughput figure."""
    world = World(loopback)
    hits = []
    for number, site in enumerate(SITES):
        url = world.page(
            site,
            "/throughput",
            article(
                f"湛江港吞吐量创新高（{site}）",
                [
                    "湛江港今年货物吞吐量预计突破3亿吨，同比增长约百分之八，集装箱航线持续加密。",
                    "港口集团表示，新建的30万吨级航道将在明年投入使用，进一步提升吞吐能力。",
                    f"业内人士认为，西部陆海新通道的建设带动了湛江港腹地货源的增长（{number}）。",
                ],
                published="2026-11-20",
            ),
        )
        hits.append(hit(url, f"湛江港吞吐量 {site}", "湛江港货物吞吐量"))
    world.results(QUESTION, hits)
    return world


@pytest.fixture(scope="module")
def listed(
    tmp_path_factory: pytest.TempPathFactory, module_server: LoopbackServer
) -> dict[str, Tool]:
    """The tools one stdio server lists (the tests only read them: one server for all)."""
    folder = tmp_path_factory.mktemp("listed")
    params = server_params("--config", str(settings_file(folder, World(module_server))))

    async def session() -> dict[str, Tool]:
        async with Client(params) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    return asyncio.run(session())


@dataclass(frozen=True)
class Answered:
    """One answer over stdio: its text and structured content, the server's stderr, and the
    paths (with hosts) the answer asked the loopback world for."""

    text: str
    model: dict[str, Any]
    stderr: str
    requested: list[tuple[str, str]]


@pytest.fixture(scope="module")
def answered(tmp_path_factory: pytest.TempPathFactory, module_server: LoopbackServer) -> Answered:
    """``answer`` called once over stdio, the server's stderr kept in a file (the tests only
    read the result: one server and one answer for all)."""
    module_server.requests.clear()
    world = serve_three_sources(module_server)
    folder = tmp_path_factory.mktemp("answered")
    params = server_params("--config", str(settings_file(folder, world)))
    stderr_path = folder / "stderr.txt"

    async def session() -> tuple[str, dict[str, Any]]:
        with stderr_path.open("w", encoding="utf-8") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                result = await client.call_tool("answer", {"question": QUESTION})
                texts = [getattr(item, "text", "") for item in result.content]
                assert len(texts) == 1
                return texts[0], structured(result)

    text, model = asyncio.run(session())
    requested = [(request.host, request.path) for request in module_server.requests]
    return Answered(text, model, stderr_path.read_text(encoding="utf-8"), requested)


def test_every_tool_and_parameter_is_titled_described_and_annotated(
    listed: dict[str, Tool],
) -> None:
    tools = listed
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.title == f"External query: {name}"
        assert tool.description
        # Clean text: no docstring line breaks or indentation reach the client.
        assert "\n" not in tool.description
        assert "  " not in tool.description
        for parameter, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{name}.{parameter} has no description"
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (name in READ_ONLY), name
    assert tools["answer"].annotations is not None
    assert tools["answer"].annotations.open_world_hint is True
    assert tools["operate"].annotations is not None
    assert tools["operate"].annotations.destructive_hint is False


def test_closed_values_are_enums_and_read_evidence_is_bounded(listed: dict[str, Tool]) -> None:
    tools = listed
    for name in ("arguments", "operate"):
        assert tools[name].input_schema["properties"]["tool"]["enum"] == list(TOOL_NAMES)
    # The design's names are advertised; the older ones stay callable but are not listed.
    assert TOOL_NAMES == (
        "web.open_link",
        "web.read_section",
        "files.list",
        "files.search",
        "files.read",
        "read_evidence",
        "evidence_page",
        "record_evidence",
        "save_report",
    )
    assert not {"web.open", "web.follow", "evidence.read", "report.save"} & set(TOOL_NAMES)

    read = tools["read_evidence"].input_schema["properties"]
    assert read["limit"]["maximum"] == MAX_READ_CHARS == 1200
    assert read["limit"]["minimum"] == 1
    assert read["offset"]["minimum"] == 0
    assert tools["arguments"].input_schema["properties"]["start"]["minimum"] == 0


def test_answer_semantics_is_a_typed_object_with_the_query_kind_vocabulary(
    listed: dict[str, Tool],
) -> None:
    answer = listed["answer"]
    assert answer.input_schema["required"] == ["question"]
    semantics = answer.input_schema["properties"]["semantics"]
    fields = semantics["properties"]
    assert set(fields) == {
        "query_kind",
        "answer_contract",
        "location",
        "entities",
        "compare_targets",
        "time_range",
        "freshness_required",
        "language",
        "search_queries",
        "asked_value",
    }
    assert "required" not in semantics  # every field stays optional
    assert semantics["additionalProperties"] is False
    assert all(field.get("description") for field in fields.values())
    assert fields["query_kind"]["enum"] == [*CORE_QUERY_KINDS, None]
    assert fields["answer_contract"]["enum"][:3] == [
        "direct_fact",
        "summary_with_sources",
        "compare_with_sources",
    ]
    time_range = next(item for item in fields["time_range"]["anyOf"] if item["type"] == "object")
    assert set(time_range["properties"]) == {"start", "end"}
    assert time_range["required"] == ["start", "end"]
    # The answer's structured content is described by the answer model.
    assert answer.output_schema is not None
    assert {"status", "text", "sources", "evidence", "audit"} <= set(
        answer.output_schema["properties"]
    )


def test_an_answer_over_stdio_is_short_readable_text_and_the_full_model(
    answered: Answered,
) -> None:
    text, model = answered.text, answered.model
    assert model["status"] == "answered"
    assert len(model["sources"]) == 3
    assert len(text) < 4000
    assert text.startswith(model["text"].rstrip())
    assert "status: answered · contract: summary_with_sources" in text
    for source in model["sources"]:
        assert source["url"] in text
    placed = [item for item in model["evidence"] if item["ref"]]
    assert placed
    assert all(item["ref"] in text for item in placed)
    # The structured content is the whole model, which the text is not.
    assert {"plan", "attempts", "verifier", "admission", "audit"} <= set(model)
    assert '"audit"' not in text


def test_the_server_writes_no_fetched_url_to_stderr(answered: Answered) -> None:
    # The answer did fetch the search and every page ...
    assert answered.model["status"] == "answered"
    assert any(path == "/searx/search" for _, path in answered.requested)
    for site in SITES:
        assert (site, "/throughput") in answered.requested
    # ... and the server's stderr names none of them (httpx logs each at INFO).
    stderr = answered.stderr
    assert "http://" not in stderr
    assert "HTTP Request" not in stderr
    for site in SITES:
        assert site not in stderr


class PortStatistics(Adapter):
    """A source declaring a query kind the core vocabulary lacks."""

    kind: ClassVar[str] = "test_port_statistics"
    provider_type: ClassVar[ProviderType] = "fact_api"
    supported_query_kinds: ClassVar[tuple[str, ...]] = ("port_statistics",)

    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        return AdapterOutcome(status="empty")


def test_the_query_kind_vocabulary_adds_the_configured_adapters_kinds() -> None:
    register_adapter(PortStatistics.kind, PortStatistics, replace=True)
    settings = Settings.from_mapping({"adapters": [{"kind": PortStatistics.kind, "id": "ports"}]})
    session = ToolkitSession()

    async def run() -> None:
        async with (
            ExternalQueryService(settings, store=session.store) as service,
            Client(build_server(session, service)) as client,
        ):
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            fields = listed["answer"].input_schema["properties"]["semantics"]["properties"]
            assert fields["query_kind"]["enum"] == [*CORE_QUERY_KINDS, "port_statistics", None]

            refused = await client.call_tool(
                "answer", {"question": QUESTION, "semantics": {"query_kind": "sports"}}
            )
            message = error_text(refused)
            assert "unknown query kind 'sports'; known kinds:" in message
            assert "port_statistics" in message
            assert "\n" not in message

    asyncio.run(run())


@pytest.mark.parametrize(
    ("semantics", "expected"),
    [
        ({"query_kind": 5}, "query_kind: Input should be a valid string"),
        (
            {"time_range": {"start": "2026-11-30", "end": "2026-11-01"}},
            "time_range: time_range end 2026-11-01 is before start 2026-11-30",
        ),
        ({"time_range": {"start": "2026-11-30"}}, "time_range.end: Field required"),
        ({"where": "湛江"}, "where: unknown key"),
        ("not an object", "query_semantics must be an object, not str"),
    ],
)
def test_invalid_semantics_are_a_one_line_tool_error(semantics: Any, expected: str) -> None:
    session = ToolkitSession()

    async def run() -> str:
        async with (
            ExternalQueryService(Settings(), store=session.store) as service,
            Client(build_server(session, service)) as client,
        ):
            refused = await client.call_tool(
                "answer", {"question": QUESTION, "semantics": semantics}
            )
            return error_text(refused)

    message = asyncio.run(run())
    assert expected in message
    assert "\n" not in message
