"""The mcp_docs adapter: an MCP client of a documentation server the test starts over stdio
(the world's tool server), with failover, restarts and no orphan processes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from external_query_service import ExternalQueryService, Settings, SettingsError
from external_query_service.models import ExternalQueryPlan
from external_query_service.testing import World
from external_query_service.testing.content import article

pytest.importorskip("mcp")

from tests.support.widget_docs import CACHE_DOC, INSTALL_DOC, QUESTION, SEMANTICS


@pytest.fixture
def world() -> Iterator[World]:
    with World() as world:
        yield world


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def server_pid(path: Path) -> int:
    return int(path.read_text(encoding="utf-8"))


def test_a_documentation_question_is_answered_from_the_mcp_server_quoting_the_document(
    world: World,
) -> None:
    docs = world.mcp_docs(documents=[INSTALL_DOC, CACHE_DOC])
    with world.service(docs) as service:
        assert service.probe() == {"docs": service.gateway.readiness()["docs"]}
        assert service.probe()["docs"].ready
        answer = service.answer(QUESTION, SEMANTICS)

    assert answer.status == "answered", answer.attempts
    [evidence] = answer.evidence
    assert evidence.basis == "doc_body"
    assert evidence.provider_type == "doc_search"
    assert evidence.url == "docs://docs/search_docs/1"
    assert evidence.title == "Configuring the widget cache"
    assert "300 seconds" in evidence.snippet
    assert service.store.quote(evidence.ref or "", evidence.offset, evidence.length) == (
        evidence.snippet
    )
    assert "300 seconds" in answer.text
    assert answer.attempts[0].source is None  # a local process, no host to name


def test_the_arguments_template_fills_the_query_into_every_string(world: World) -> None:
    docs = world.mcp_docs(
        documents=[CACHE_DOC],
        arguments={"q": "{query}", "filters": {"about": "topic: {query}"}, "limit": 3},
        query_argument="q",
        input_schema={
            "type": "object",
            "properties": {"q": {"type": "string"}, "filters": {"type": "object"}},
            "required": ["q", "filters"],
        },
        pid_file=None,
    )
    with world.service(docs) as service:
        assert service.probe()["docs"].ready
        answer = service.answer(QUESTION, SEMANTICS)
    assert answer.status == "answered", answer.attempts


def test_the_probe_finds_a_missing_tool_and_arguments_the_schema_refuses(world: World) -> None:
    missing = world.mcp_docs("missing", documents=[CACHE_DOC])
    missing["tool"] = "no_such_tool"
    refused = world.mcp_docs(
        "refused",
        documents=[CACHE_DOC],
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query", "limit"],
        },
    )
    with world.service(missing, refused) as service:
        probed = service.probe()
    assert probed["missing"].reason == "tool_missing"
    assert probed["refused"].reason == "arguments_invalid"


def test_a_weather_question_never_ranks_the_mcp_adapter_first(world: World) -> None:
    docs = world.mcp_docs("a-docs", documents=[CACHE_DOC])
    with world.service(docs, world.open_meteo(), world.searxng("z-searx")) as service:
        for kind in ("weather", "generic_web", "news"):
            plan = ExternalQueryPlan(
                question="湛江明天天气怎么样？", query_kind=kind, search_queries=("湛江 天气",)
            )
            ranking = service.gateway.rank(plan)
            assert ranking[0].adapter_id != "a-docs"
            [mcp] = [item for item in ranking if item.adapter_id == "a-docs"]
            assert (mcp.rank, mcp.excluded) == (None, "kind_not_served")
        documentation = ExternalQueryPlan(
            question=QUESTION, query_kind="documentation", search_queries=("widget",)
        )
        assert service.gateway.rank(documentation)[0].adapter_id == "a-docs"


@pytest.mark.parametrize(
    ("fault", "reason", "failure"),
    [
        ("hang", "deadline_exceeded", "transient"),
        ("reset", "server_closed", "transient"),
        ("oversized", "content_too_large", "transient"),
        ("tool_error", "tool_error", "transient"),
    ],
)
def test_a_failing_server_fails_the_attempt_with_a_reason_and_the_gateway_fails_over(
    world: World, tmp_path: Path, fault: str, reason: str, failure: str
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "cache.md").write_text(f"# {CACHE_DOC['title']}\n\n{CACHE_DOC['text']}\n")
    docs = {**world.mcp_docs("a-mcp", documents=[CACHE_DOC], fault=fault), "timeout_s": 1.0}
    local = {"kind": "local_docs", "id": "b-local", "root": str(folder)}
    started = time.monotonic()
    with world.service(docs, local) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    first, second = answer.attempts
    assert (first.adapter_id, first.status, first.reason, first.failure) == (
        "a-mcp",
        "failed",
        reason,
        failure,
    )
    assert (second.adapter_id, second.status) == ("b-local", "ok")
    assert answer.status == "answered"
    assert time.monotonic() - started < 15


def test_a_crashed_server_is_started_again_for_the_next_question(
    world: World, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    docs = world.mcp_docs(documents=[CACHE_DOC], fault="reset", pid_file=str(pid_file))
    with world.service(docs) as service:
        crashed = service.answer(QUESTION, SEMANTICS)
        first_pid = server_pid(pid_file)
        world.set_tool_spec("docs", fault=None)
        answered = service.answer(QUESTION, SEMANTICS)
        second_pid = server_pid(pid_file)
        again = service.answer(QUESTION, SEMANTICS)

    assert crashed.attempts[0].reason == "server_closed"
    assert answered.status == "answered"
    assert second_pid != first_pid
    assert again.status == "answered"
    assert server_pid(pid_file) == second_pid  # kept between questions, not restarted


def test_closing_the_service_stops_the_server_process(world: World, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    docs = world.mcp_docs(documents=[CACHE_DOC], pid_file=str(pid_file))
    service = world.service(docs)
    assert service.answer(QUESTION, SEMANTICS).status == "answered"
    pid = server_pid(pid_file)
    assert alive(pid)
    service.close()
    assert not alive(pid)


def test_closing_an_async_service_stops_the_server_of_its_loop(
    world: World, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    docs = world.mcp_docs(documents=[CACHE_DOC], pid_file=str(pid_file))

    async def ask() -> tuple[str, int]:
        async with world.service(docs) as service:
            answer = await service.aanswer(QUESTION, SEMANTICS)
            pid = server_pid(pid_file)
            assert alive(pid)
        return answer.status, pid

    status, pid = asyncio.run(ask())
    assert status == "answered"
    assert not alive(pid)


def test_items_with_web_urls_are_fetched_under_the_network_policy(world: World) -> None:
    page = world.page(
        "widgets.test",
        "/cache",
        article(
            "Widget cache",
            [
                CACHE_DOC["text"],
                "Entries evicted from the widget cache are rebuilt on the next request, so a "
                "short time to live trades memory for extra work on every cache miss.",
                "The cache is shared by every worker of one widget server process.",
            ],
            lang="en",
            site_name="Widget docs",
        ),
    )
    documents = [
        {"title": "Widget cache (web)", "text": "widget cache entries", "url": page},
        {
            "title": "Widget cache metadata",
            "text": "widget cache entries",
            "url": "http://169.254.169.254/latest",
        },
    ]
    docs = world.mcp_docs(documents=documents)
    with world.service(docs) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    assert answer.status == "answered", answer.audit.for_stage("gateway")
    [evidence] = answer.evidence
    assert (evidence.url, evidence.basis) == (page, "page_body")
    assert evidence.provider_type == "live_search"  # judged like a search adapter's page
    assert not [r for r in world.requests if r.host == "169.254.169.254"]
    detail = next(e for e in answer.audit.for_stage("gateway") if e.event == "attempt").detail
    failures = detail["page_failures"]
    assert isinstance(failures, list)
    assert any("blocked_destination" in str(item) for item in failures)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"env": ["TOKEN=abc"]}, "env lists variable names"),
        ({"arguments": {"query": "widgets"}}, "no argument holds {query}"),
        ({"url": "http://127.0.0.1:9/mcp"}, "unknown key 'url'"),
    ],
)
def test_bad_options_are_settings_errors(options: dict[str, Any], message: str) -> None:
    table = {"kind": "mcp_docs", "id": "docs", "command": ["server"], "tool": "t", **options}
    with pytest.raises(SettingsError, match=message):
        ExternalQueryService(Settings.from_mapping({"adapters": [table]}))


def test_a_command_that_cannot_start_is_a_misconfigured_attempt(tmp_path: Path) -> None:
    table = {
        "kind": "mcp_docs",
        "id": "docs",
        "command": [str(tmp_path / "no-such-server")],
        "tool": "search_docs",
    }
    with ExternalQueryService(Settings.from_mapping({"adapters": [table]})) as service:
        assert service.probe()["docs"].reason == "server_start_failed"
        answer = service.answer(QUESTION, SEMANTICS)
    [attempt] = answer.attempts
    assert (attempt.reason, attempt.failure) == ("server_start_failed", "misconfigured")
    assert answer.reason == "provider_misconfigured"


def test_only_the_named_environment_variables_reach_the_server(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCS_PASSED", "passed-value")
    monkeypatch.setenv("DOCS_HIDDEN", "hidden-value")
    pid_file = tmp_path / "pid"
    docs = {**world.mcp_docs(documents=[CACHE_DOC], pid_file=str(pid_file)), "env": ["DOCS_PASSED"]}
    with world.service(docs) as service:
        assert service.answer(QUESTION, SEMANTICS).status == "answered"
        environ = Path(f"/proc/{server_pid(pid_file)}/environ").read_bytes().split(b"\0")
    assert b"DOCS_PASSED=passed-value" in environ
    assert not [item for item in environ if item.startswith(b"DOCS_HIDDEN")]
