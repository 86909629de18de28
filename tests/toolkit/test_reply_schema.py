"""The delegated reply schema admits only runnable steps; the design's tool names are the
advertised ones, the older names stay callable; evidence_page pages through passages."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from external_query_service._evidence_store import EvidenceStore
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.toolkit import ToolkitSession
from external_query_service.toolkit._kits import ALIASES, PASSAGES_PER_PAGE
from external_query_service.toolkit._operations import TOOL_NAMES
from tests.support.delegation import WEB_SCRIPT, delegate, view, web_session
from tests.support.llm_chat import ChatServer, completion
from tests.support.toolkit_tasks import make_task

OLD_NAMES = (
    "web.open",
    "web.links",
    "web.follow",
    "evidence.read",
    "evidence.record",
    "report.save",
)


def first_fill(schema: dict[str, Any]) -> Any:
    """The minimal instance a constrained decoder could write, always taking the first
    branch, the first enum value, ``false`` and the empty array."""
    if "anyOf" in schema:
        return first_fill(schema["anyOf"][0])
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {name: first_fill(schema["properties"][name]) for name in schema["required"]}
    return {"array": [], "boolean": False, "string": "x", "null": None}[kind]


def fills_from_its_schema(body: dict[str, Any]) -> Reply:
    schema = body["response_format"]["json_schema"]["schema"]
    return completion(json.dumps(first_fill(schema)))


def objects(schema: Any) -> list[dict[str, Any]]:
    """Every object schema inside ``schema``."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found += objects(value)
    elif isinstance(schema, list):
        for value in schema:
            found += objects(value)
    return found


def test_a_model_that_fills_the_schema_from_its_first_branch_is_never_refused(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(*[fills_from_its_schema] * 12)
    session = web_session(tmp_path, docs, chat)

    result = delegate(session, max_steps=8)

    assert result.cost.refusals == 0, result.stopped_because
    assert result.status == "budget_exhausted"
    assert len([step for step in result.steps if step.chosen_by == "model"]) == 8
    # Every reply named a runnable step: the entry and the links it showed were opened.
    assert result.steps[0].tool == "web.open_link"
    assert {"/", "/guide"} <= {
        path for path in ("/", "/guide", "/licence") if docs.requests_to(path, host="docs.test")
    }


def test_the_reply_schema_has_one_closed_branch_per_tool_on_offer_plus_a_stop(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    chat.then(*WEB_SCRIPT[:3], fills_from_its_schema)
    session = web_session(tmp_path, docs, chat)

    delegate(session, max_steps=4)

    body = chat.bodies[3]
    schema = body["response_format"]["json_schema"]
    assert schema["strict"] is True
    offered = [item["tool"] for item in view(body)["tools_on_offer"]]
    branches = schema["schema"]["properties"]["step"]["anyOf"]
    assert len(branches) == len(offered) + 1
    assert branches[-1]["properties"]["tool"] == {"type": "null", "description": "Stop the run."}
    for name, branch in zip(offered, branches, strict=False):
        variants = branch.get("anyOf", [branch])
        for variant in variants:
            assert variant["properties"]["tool"]["const"] == name
            fields = [key for key in variant["properties"] if key != "tool"]
            contract = session.contract(name)
            assert fields == [parameter.name for parameter in contract.parameters]
            assert all(variant["properties"][key]["type"] == "string" for key in fields)
    # Strict structured output: every object closed, every property required.
    for node in objects(schema["schema"]):
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    # A dependent parameter only ever lists its own parent's children.
    record = branches[offered.index("record_evidence")]
    offer = next(item for item in view(body)["tools_on_offer"] if item["tool"] == "record_evidence")
    by_parent = offer["parameters"][1]["options_by_parent"]
    for variant in record["anyOf"]:
        (parent,) = variant["properties"]["category"]["enum"]
        children = variant["properties"]["passage"]["enum"]
        assert children == [option["id"] for option in by_parent[parent]]


def test_a_reply_in_the_old_shape_is_refused_as_invalid_and_nothing_runs(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    def old_shape(body: dict[str, Any]) -> Reply:
        shown = view(body)
        entry = shown["tools_on_offer"][0]["parameters"][0]["options"][0]["id"]
        old = {"note": "x", "done": False, "state_ref": shown["state_ref"]}
        return completion(json.dumps(old | {"tool": "web.open_link", "options": [entry]}))

    chat.then(old_shape, old_shape, old_shape)
    result = delegate(web_session(tmp_path, docs, chat))

    assert result.status == "refused_too_often"
    assert result.cost.refusals == 3
    assert "invalid_reply" in result.stopped_because
    assert docs.requests_to("/", host="docs.test") == []


def test_sessions_and_delegation_list_the_design_names_and_older_names_still_run(
    tmp_path: Path, docs: LoopbackServer, chat: ChatServer
) -> None:
    session = ToolkitSession(make_task(tmp_path, docs))
    seen = session.observe()
    listed = [tool.name for tool in seen.tools]
    assert listed == [name for name in TOOL_NAMES if not name.startswith("files.")]
    assert not set(OLD_NAMES) & set(listed)
    assert set(ALIASES) == set(OLD_NAMES)
    assert set(ALIASES.values()) <= set(TOOL_NAMES)
    # An older name is callable, with its older parameters.
    entry = session.arguments("web.open", seen.state_ref).domains[0].options[0].id
    opened = asyncio.run(session.operate("web.open", {"url": entry}, seen.state_ref))
    assert opened.ok
    state = session.observe().state_ref
    follow = session.arguments("web.follow", state).domains[0]
    assert follow.parameter == "link"
    assert asyncio.run(session.operate("web.follow", {"link": follow.options[0].id}, state)).ok

    chat.then(*WEB_SCRIPT)
    delegated = web_session(tmp_path / "delegated", docs, chat)
    delegate(delegated)
    for body in chat.bodies:
        offered = {item["tool"] for item in view(body)["tools_on_offer"]}
        assert offered <= set(TOOL_NAMES)


def test_evidence_page_pages_through_a_captures_passages(tmp_path: Path) -> None:
    store = EvidenceStore()
    text = "\n\n".join(f"Paragraph {n}: " + "word " * 60 for n in range(25))
    ref = store.put(text, "test:long")
    assert store.chunk_options(ref) == store.passage_options(ref)
    passages = store.chunk_options(ref)
    assert len(passages) > PASSAGES_PER_PAGE * 2

    session = ToolkitSession(store=store)
    listed: list[str] = []
    for number in range(3):
        state = session.observe().state_ref
        capture = session.arguments("evidence_page", state).domains[0].options[0].id
        pages = session.arguments("evidence_page", state, {"ref": capture}).domains[0]
        assert pages.total == -(-len(passages) // PASSAGES_PER_PAGE)
        chosen = pages.options[number].id
        outcome = asyncio.run(
            session.operate("evidence_page", {"ref": capture, "page": chosen}, state)
        )
        assert outcome.ok
        assert isinstance(outcome.result, dict)
        assert outcome.result["page"] == number
        listed += [item["passage_id"] for item in outcome.result["passages"]]  # type: ignore[index, union-attr]
    assert listed == [p.passage_id for p in passages[: len(listed)]]
    assert len(listed) == len(passages)
