"""Recording a world with Brave, Tavily or an MCP documentation server, and replaying it
offline, gives the same answer."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from external_query_service.testing import World, comparable_answer, load_world, open_world
from external_query_service.testing._recorder import record_world
from external_query_service.testing.world import WORLD_KEY, WORLD_KEY_ENV
from tests.support.keyed_search import BRAVE_KEY, QUESTION, SEMANTICS, TAVILY_KEY, serve
from tests.support.widget_docs import CACHE_DOC, INSTALL_DOC
from tests.support.widget_docs import QUESTION as DOC_QUESTION
from tests.support.widget_docs import SEMANTICS as DOC_SEMANTICS
from tests.support.world import NOW

pytest.importorskip("mcp")


def brave(world: World) -> tuple[dict[str, Any], str, dict[str, Any]]:
    serve(world)
    return world.brave(), QUESTION, SEMANTICS


def tavily(world: World) -> tuple[dict[str, Any], str, dict[str, Any]]:
    serve(world)
    return world.tavily(), QUESTION, SEMANTICS


def tavily_provider_text(world: World) -> tuple[dict[str, Any], str, dict[str, Any]]:
    tavily(world)
    return world.tavily(use_provider_content=True), QUESTION, SEMANTICS


def mcp_docs(world: World) -> tuple[dict[str, Any], str, dict[str, Any]]:
    return world.mcp_docs(documents=[INSTALL_DOC, CACHE_DOC]), DOC_QUESTION, DOC_SEMANTICS


@pytest.mark.parametrize("build", [brave, tavily, tavily_provider_text, mcp_docs])
def test_a_recorded_world_replays_the_same_answer_offline(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    build: Callable[[World], tuple[dict[str, Any], str, dict[str, Any]]],
) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", BRAVE_KEY)
    monkeypatch.setenv("TAVILY_API_KEY", TAVILY_KEY)
    out = tmp_path / "world"
    with World(now=NOW) as live:
        adapter, question, semantics = build(live)
        recorded = record_world(question, semantics, live.settings(adapter), out, now=NOW)
    assert recorded.answer.status == "answered", recorded.answer.attempts

    # Offline: the live world is gone, and so are the keys.
    monkeypatch.delenv("BRAVE_API_KEY")
    monkeypatch.delenv("TAVILY_API_KEY")
    monkeypatch.delenv(WORLD_KEY_ENV, raising=False)
    manifest = load_world(out).manifest
    assert [entry["kind"] for entry in manifest.adapters] == [adapter["kind"]]
    assert "command" not in manifest.adapters[0]  # a machine's command line is not kept
    with open_world(out) as world, world.service() as service:
        replayed = service.answer(question, semantics)
        if adapter["kind"] != "mcp_docs":  # a placeholder the world set, not a key
            assert os.environ[WORLD_KEY_ENV] == WORLD_KEY

    assert comparable_answer(replayed, same_envelope=False) == comparable_answer(
        recorded.answer, same_envelope=False
    )
    text = "".join(p.read_text("utf-8", "replace") for p in out.rglob("*") if p.is_file())
    assert BRAVE_KEY not in text
    assert TAVILY_KEY not in text


def test_a_recorded_tool_failure_replays_as_the_same_failure(
    tmp_path: Path,
) -> None:
    out = tmp_path / "world"
    with World(now=NOW) as live:
        docs = {**live.mcp_docs(documents=[CACHE_DOC], fault="reset")}
        folder = tmp_path / "docs"
        folder.mkdir()
        (folder / "cache.md").write_text(f"# {CACHE_DOC['title']}\n\n{CACHE_DOC['text']}\n")
        local = {"kind": "local_docs", "id": "z-local", "root": str(folder)}
        settings = live.settings(docs, local)
        recorded = record_world(
            DOC_QUESTION, DOC_SEMANTICS, settings, out, now=NOW, allow_failed=True
        )
    assert recorded.answer.attempts[0].reason == "server_closed"
    [entry] = load_world(out).manifest.tools
    assert (entry.adapter, entry.fault) == ("docs", "reset")
    with open_world(out) as world, world.service() as service:
        replayed = service.answer(DOC_QUESTION, DOC_SEMANTICS)
    assert [(a.adapter_id, a.reason) for a in replayed.attempts] == [("docs", "server_closed")]
