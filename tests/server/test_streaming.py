"""Streamed answers over real HTTP (uvicorn on 127.0.0.1) from a loopback world that holds a
page back: events in order, the first before the page is served, heartbeats, errors, and a
disconnect that stops every further page request."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from external_query_service import ExternalQueryService, Settings
from external_query_service.models import ExternalAnswer
from external_query_service.testing import (
    Reply,
    World,
)
from tests.support.air_show import PAGE, QUESTION, HeldPage, held_world
from tests.support.serving import DOCS, DOCS_QUESTION, write_docs

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from external_query_service.server import ServerThread

STREAM = {"Accept": "text/event-stream"}


@pytest.fixture
def world() -> Iterator[World]:
    with World() as opened:
        yield opened


def events(reply: httpx.Response) -> Iterator[tuple[str, Any]]:
    """(name, data) per event as it arrives; comments as ("", text)."""
    name = None
    for line in reply.iter_lines():
        if line.startswith(":"):
            yield "", line
        elif line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            assert name is not None
            yield name, json.loads(line.removeprefix("data: "))
            name = None


def test_events_arrive_in_order_and_the_first_before_the_held_page(world: World) -> None:
    held = HeldPage(Reply(body=PAGE))
    with (
        ServerThread(held_world(world, held)) as server,
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST", f"{server.url}/v1/answer", json={"question": QUESTION}, headers=STREAM
        ) as reply,
    ):
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        assert reply.headers["cache-control"] == "no-store"
        assert len(reply.headers["x-request-id"]) == 32
        seen = events(reply)
        name, plan = next(seen)
        assert name == "plan"
        assert not held.served.is_set()  # the page is still held back
        assert plan["query_kind"] == "generic_web"
        held.release.set()
        rest = list(seen)
    names = [name for name, _ in rest]
    assert names == ["attempt", "verified", "answer"]
    attempt, verified, answer = (data for _, data in rest)
    assert attempt["adapter"] == "searx"
    assert attempt["status"] == "ok"
    assert attempt["pages_read"] >= 1
    found = ExternalAnswer.model_validate({k: v for k, v in answer.items() if k != "session_id"})
    assert verified == {"status": found.status, "reason": found.reason}
    assert isinstance(answer["session_id"], str)
    assert set(answer) == {*ExternalAnswer.model_fields, "session_id"}  # the route's JSON


@pytest.mark.parametrize("disconnect", [True, False], ids=["disconnect", "stay"])
def test_a_disconnect_cancels_the_question_and_no_page_is_requested_after(
    world: World, disconnect: bool
) -> None:
    held = HeldPage(Reply(status=404, body="gone", content_type="text/plain"))
    # One page at a time: once the held page fails, the walk would go on to the next.
    service = held_world(world, held, network={"max_pages": 1})
    with ServerThread(service) as server, httpx.Client(timeout=30) as client:
        with client.stream(
            "POST", f"{server.url}/v1/answer", json={"question": QUESTION}, headers=STREAM
        ) as reply:
            seen = events(reply)
            assert next(seen)[0] == "plan"
            deadline = time.monotonic() + 10
            while not world.requests_to("/news") and time.monotonic() < deadline:
                time.sleep(0.01)
            if not disconnect:
                held.release.set()
                assert [name for name, _ in seen][-1] == "answer"
        if disconnect:  # the stream is closed: the server must notice and cancel
            deadline = time.monotonic() + 10
            while service.questions.active and time.monotonic() < deadline:
                time.sleep(0.01)
            assert service.questions.active == 0
            held.release.set()
            assert held.served.wait(10)
            time.sleep(0.5)  # time enough for a walk that went on to ask for the next page
    pages = [request.host for request in world.requests_to("/news")]
    if disconnect:
        assert pages == ["first.test"]
    else:
        assert pages[:2] == ["first.test", "site2.test"]  # what a walk not cancelled does


def test_a_quiet_stream_gets_heartbeat_comments(world: World) -> None:
    held = HeldPage(Reply(body=PAGE))
    service = held_world(world, held, server={"stream_heartbeat_s": 0.1})
    with (
        ServerThread(service) as server,
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST", f"{server.url}/v1/answer", json={"question": QUESTION, "stream": True}
        ) as reply,
    ):
        seen = events(reply)
        assert next(seen)[0] == "plan"
        assert next(seen) == ("", ": heartbeat")
        held.release.set()
        names = [name for name, _ in seen if name]
    assert names[-1] == "answer"


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    # Pages analysed in a thread: the server's warm-up starts no worker process.
    settings = Settings.from_mapping({"analysis": {"processes": 0}})
    settings = settings.with_docs(write_docs(tmp_path_factory.mktemp("docs")))
    with ServerThread(ExternalQueryService(settings)) as server:
        yield server


def stream(url: str, body: dict[str, Any], **headers: str) -> list[tuple[str, Any]]:
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", url, json=body, headers=headers) as reply,
    ):
        assert reply.status_code == 200
        return [item for item in events(reply) if item[0]]


def test_stream_true_and_the_follow_up_route_stream_the_same_way(docs_server: ServerThread) -> None:
    first = stream(
        f"{docs_server.url}/v1/answer",
        {"question": DOCS_QUESTION, "semantics": DOCS, "stream": True},
    )
    assert [name for name, _ in first] == ["plan", "attempt", "verified", "answer"]
    session_id = first[-1][1]["session_id"]
    follow = stream(
        f"{docs_server.url}/v1/sessions/{session_id}/follow-up",
        {"question": "And the sources?"},
        **STREAM,
    )
    assert [name for name, _ in follow] == ["plan", "attempt", "verified", "answer"]
    assert follow[0][1]["source"] == "follow_up"
    assert follow[-1][1]["session_id"] == session_id


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"question": "   "}, "empty_question"),
        ({"question": "q", "semantics": {"query_kind": "horoscope"}}, "unknown_query_kind"),
        ({"question": "x" * 20_001}, "question_too_long"),
    ],
    ids=["blank", "unknown-kind", "too-long"],
)
@pytest.mark.parametrize("route", ["answer", "follow-up"])
@pytest.mark.parametrize("asked", ["stream-true", "accept-header"])
def test_a_question_that_cannot_be_asked_is_refused_with_its_4xx_before_any_event(
    docs_server: ServerThread, body: dict[str, Any], reason: str, route: str, asked: str
) -> None:
    url = f"{docs_server.url}/v1/answer"
    if route == "follow-up":
        first = stream(url, {"question": DOCS_QUESTION, "semantics": DOCS, "stream": True})
        url = f"{docs_server.url}/v1/sessions/{first[-1][1]['session_id']}/follow-up"
    headers = STREAM if asked == "accept-header" else {}
    sent = {**body, "stream": True} if asked == "stream-true" else body
    reply = httpx.post(url, json=sent, headers=headers, timeout=30)
    assert reply.status_code == 422
    assert reply.headers["content-type"] == "application/json"
    assert reply.json()["error"]["reason"] == reason


def test_the_deadline_ends_a_stream_with_deadline_exceeded(world: World, tmp_path: Path) -> None:
    held = HeldPage(Reply(body=PAGE))
    # Every page held: no answer can form before the deadline, however fast the host.
    service = held_world(world, held, hold_all=True, server={"request_deadline_s": 0.5})
    try:
        with ServerThread(service) as server:
            found = stream(f"{server.url}/v1/answer", {"question": QUESTION}, **STREAM)
    finally:
        held.release.set()
    assert found[0][0] == "plan"
    assert found[-1] == (
        "error",
        {
            "error": {
                "reason": "deadline_exceeded",
                "message": "no answer within the request deadline of 0.5 s",
            }
        },
    )
