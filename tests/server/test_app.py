"""``external-query serve``'s app over real HTTP: uvicorn on 127.0.0.1 (port 0) on a thread,
a local docs folder or a slow loopback world behind it."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from external_query_service import ExternalQueryService, ServiceClosed, Settings
from external_query_service._evidence_store import MAX_READ_CHARS
from external_query_service.models import ExternalAnswer, QuerySemantics
from external_query_service.testing import World, article, hit, json_reply, searx_body
from tests.support.air_show import QUESTION, slow_world_settings
from tests.support.serving import DOCS, DOCS_QUESTION, write_docs

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from external_query_service.server import ServerThread
from external_query_service.storage import migrate_ledger
from tests.support.paths import REPO

#: Settings whose pages are analysed in a thread: the server's warm-up starts no worker
#: process where the pool is not what a test is about.
IN_THREAD_SECTION = {"analysis": {"processes": 0}}
IN_THREAD = Settings.from_mapping(IN_THREAD_SECTION)


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    docs = write_docs(tmp_path_factory.mktemp("docs"))
    with ServerThread(ExternalQueryService(IN_THREAD.with_docs(docs))) as server:
        yield server


@pytest.fixture
def client(docs_server: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=docs_server.url, timeout=30) as opened:
        yield opened


def ask(client: httpx.Client, question: str = DOCS_QUESTION, **body: Any) -> dict[str, Any]:
    reply = client.post("/v1/answer", json={"question": question, "semantics": DOCS, **body})
    assert reply.status_code == 200, reply.text
    found: dict[str, Any] = reply.json()
    return found


def metric(client: httpx.Client, name: str, **labels: str) -> float:
    """One sample's value from /metrics (0 when the series does not exist yet)."""
    text = client.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


# -- the routes ------------------------------------------------------------------------------


def test_an_answer_is_the_ask_json_plus_a_session_id(client: httpx.Client) -> None:
    found = ask(client)
    session_id = found.pop("session_id")
    assert isinstance(session_id, str)
    assert len(session_id) >= 20
    answer = ExternalAnswer.model_validate(found)  # exactly the model, nothing more
    assert answer.status == "answered"
    assert answer.evidence[0].ref is not None
    assert set(found) == set(ExternalAnswer.model_fields)


def test_a_follow_up_continues_the_session_plan(client: httpx.Client) -> None:
    first = ask(client)
    reply = client.post(
        f"/v1/sessions/{first['session_id']}/follow-up", json={"question": "And the sources?"}
    )
    assert reply.status_code == 200, reply.text
    follow = reply.json()
    assert follow["session_id"] == first["session_id"]
    assert follow["plan"]["planner_source"] == "follow_up"
    assert follow["plan"]["query_kind"] == "documentation"  # carried, not given again


def test_evidence_reads_are_bounded_and_walk_the_whole_text(client: httpx.Client) -> None:
    ref = ask(client)["evidence"][0]["ref"]
    first = client.get(f"/v1/evidence/{ref}").json()
    assert first["length"] == MAX_READ_CHARS < first["total"]
    text, offset = "", 0
    while offset is not None:
        window = client.get(f"/v1/evidence/{ref}", params={"offset": offset, "limit": 500})
        assert window.status_code == 200
        text += window.json()["text"]
        assert window.json()["length"] <= 500
        offset = window.json()["next_offset"]
    assert len(text) == first["total"]
    assert text.startswith(first["text"])


def test_healthz_answers_with_the_gate_counts(client: httpx.Client) -> None:
    reply = client.get("/healthz")
    assert reply.status_code == 200
    assert reply.json() == {
        "status": "ok",
        "questions_active": 0,
        "questions_waiting": 0,
        "pid": os.getpid(),  # a server thread answers from this process
    }


def test_readyz_lists_each_adapter_and_is_200_when_one_is_ready(client: httpx.Client) -> None:
    reply = client.get("/readyz")
    assert reply.status_code == 200
    assert reply.json() == {
        "ready": True,
        "adapters": {"docs": {"ready": True, "reason": None}},
        "ledger": None,  # answers keep their records in memory: nothing to ask
        "cache": None,  # no [cache] url
    }


def test_readyz_is_503_when_no_adapter_is_ready(tmp_path: Path) -> None:
    first, second = write_docs(tmp_path / "a"), write_docs(tmp_path / "b")
    service = ExternalQueryService(IN_THREAD.with_docs(first).with_docs(second, adapter_id="b"))
    for folder in (first, second):  # both vanish after the service started
        (folder / "verifier.md").unlink()
        folder.rmdir()
    with ServerThread(service) as server:
        reply = httpx.get(f"{server.url}/readyz")
    assert reply.status_code == 503
    assert reply.json() == {
        "ready": False,
        "adapters": {
            "docs": {"ready": False, "reason": "root_missing"},
            "b": {"ready": False, "reason": "root_missing"},
        },
        "ledger": None,
        "cache": None,
    }


def test_readyz_asks_the_configured_ledger_and_is_503_when_it_needs_migrating(
    postgres_url: str, tmp_path: Path
) -> None:
    import psycopg

    migrate_ledger(postgres_url)
    settings = Settings.from_mapping({"ledger": {"url": postgres_url}, **IN_THREAD_SECTION})
    service = ExternalQueryService(settings.with_docs(write_docs(tmp_path / "docs")))
    with ServerThread(service) as server:
        ready = httpx.get(f"{server.url}/readyz")
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("DROP TABLE meta")
        unready = httpx.get(f"{server.url}/readyz")
    assert ready.status_code == 200
    assert ready.json()["ledger"] == {"ready": True, "reason": None}
    assert unready.status_code == 503
    assert unready.json()["ledger"]["ready"] is False


def test_metrics_count_questions_attempts_and_latency(
    client: httpx.Client, docs_server: ServerThread
) -> None:
    labels = {"status": "answered", "reason": "none"}
    before = metric(client, "external_query_questions_total", **labels)
    attempts = metric(client, "external_query_adapter_attempts_total", adapter="docs", status="ok")
    timed = metric(client, "external_query_question_seconds_count", route="answer")
    errors = metric(client, "external_query_request_errors_total", reason="malformed_json")
    ask(client)
    client.post("/v1/answer", content=b"{", headers={"content-type": "application/json"})
    assert metric(client, "external_query_questions_total", **labels) == before + 1
    after = metric(client, "external_query_adapter_attempts_total", adapter="docs", status="ok")
    assert after == attempts + 1
    assert metric(client, "external_query_question_seconds_count", route="answer") == timed + 1
    assert metric(client, "external_query_request_errors_total", reason="malformed_json") == (
        errors + 1
    )
    assert "external_query_questions_active 0.0" in client.get("/metrics").text
    for kind in ("search", "api", "page", "analysis"):  # every kind shown from the start
        assert f'external_query_cache_hits_total{{kind="{kind}"}}' in client.get("/metrics").text


def test_two_identical_questions_show_cache_hits_and_the_bytes_of_the_pages(world: World) -> None:
    bodies = [
        article(
            f"Air show news {n}",
            [
                f"Report {n}: new transport drones and a carrier-based early-warning aircraft "
                "were shown at the air show for the first time, with exhibitors from over "
                "forty countries and regions.",
                "The new aircraft flew daily displays, and visitors could see the drones up "
                "close at the static park beside the main hall during the whole week.",
            ],
            lang="en",
        ).encode()
        for n in range(3)
    ]
    urls = [world.page(f"site{n}.test", "/news", body) for n, body in enumerate(bodies)]
    search = world.searxng()
    hits = [hit(url, f"Air show news {n}", "new aircraft") for n, url in enumerate(urls)]
    world.route(f"{search['base_url']}/search", json_reply(searx_body(QUESTION, hits)))
    with (
        ServerThread(ExternalQueryService(world.settings(search))) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        statuses = [
            client.post("/v1/answer", json={"question": QUESTION}).json()["status"]
            for _ in range(2)
        ]
        fetched = metric(client, "external_query_fetched_bytes_total", adapter="searx")
        hits_by_kind = {
            kind: metric(client, "external_query_cache_hits_total", kind=kind)
            for kind in ("search", "api", "page", "analysis")
        }
    assert statuses == ["answered", "answered"]
    # The first question fetched every page once; the second was served from the cache.
    assert fetched == sum(len(body) for body in bodies)
    assert len(world.requests_to("/news")) == 3
    assert hits_by_kind["search"] >= 1
    assert hits_by_kind["page"] >= 3
    assert hits_by_kind["analysis"] >= 1
    assert hits_by_kind["api"] == 0


def test_the_openapi_document_names_every_route(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    assert set(document["paths"]) == {
        "/v1/answer",
        "/v1/sessions/{session_id}/follow-up",
        "/v1/evidence/{ref}",
        "/v1/chat/completions",
        "/v1/models",
        "/v1/verify",
        "/healthz",
        "/readyz",
        "/metrics",
    }
    answer = document["paths"]["/v1/answer"]["post"]
    assert {"200", "400", "413", "422"} <= set(answer["responses"])
    assert "session_id" in document["components"]["schemas"]["ServedAnswer"]["properties"]


ROOT = REPO


def test_the_http_service_doc_examples_run_as_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)  # the embedding example names docs/architecture
    reference = (ROOT / "docs" / "http_service.md").read_text(encoding="utf-8")
    section = reference.split("\n## HTTP service\n", 1)[1].split("\n## ", 1)[0]
    calling, embedding = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    service = ExternalQueryService(IN_THREAD.with_docs(ROOT / "docs" / "architecture"))
    with ServerThread(service) as server:
        backend: dict[str, Any] = {}
        exec(calling.replace("http://127.0.0.1:8080", server.url), backend)
        backend["client"].close()
    assert backend["found"]["status"] == "answered"
    assert backend["follow"]["plan"]["planner_source"] == "follow_up"
    assert capsys.readouterr().out.startswith("answered False ")
    host: dict[str, Any] = {}
    exec(embedding, host)
    with TestClient(host["app"]) as client:  # runs the example's lifespan
        reply = client.post("/chat", json={"question": "What does the verifier check?"})
        service = host["app"].state.external
    assert reply.status_code == 200
    assert reply.json()["status"] == "answered"
    with pytest.raises(ServiceClosed):  # the lifespan closed it
        service.answer("again?")


# -- bad input: always a 4xx JSON error, never a 5xx ---------------------------------------

JSON = {"content-type": "application/json"}
BAD_INPUTS = [
    ("not JSON", "POST", "/v1/answer", b"question?", 400, "malformed_json"),
    ("not UTF-8", "POST", "/v1/answer", b'{"question": "\xff"}', 400, "malformed_json"),
    ("a list", "POST", "/v1/answer", b"[1, 2]", 422, "invalid_request"),
    ("a number question", "POST", "/v1/answer", b'{"question": 42}', 422, "invalid_question"),
    ("no question", "POST", "/v1/answer", b"{}", 422, "invalid_question"),
    ("empty question", "POST", "/v1/answer", b'{"question": "  "}', 422, "empty_question"),
    (
        "20,001 characters",
        "POST",
        "/v1/answer",
        json.dumps({"question": "x" * 20_001}).encode(),
        422,
        "question_too_long",
    ),
    (
        "a lone surrogate",
        "POST",
        "/v1/answer",
        b'{"question": "bad \\ud800 text"}',
        422,
        "invalid_question",
    ),
    (
        "an unknown kind",
        "POST",
        "/v1/answer",
        b'{"question": "q", "semantics": {"query_kind": "horoscope"}}',
        422,
        "unknown_query_kind",
    ),
    (
        "semantics not an object",
        "POST",
        "/v1/answer",
        b'{"question": "q", "semantics": ["weather"]}',
        422,
        "invalid_semantics",
    ),
    (
        "an unknown semantics key",
        "POST",
        "/v1/answer",
        b'{"question": "q", "semantics": {"mood": "happy"}}',
        422,
        "invalid_semantics",
    ),
    (
        "a backwards time range",
        "POST",
        "/v1/answer",
        b'{"question": "q", "semantics": {"time_range": {"start": "2026-02-01", '
        b'"end": "2026-01-01"}}}',
        422,
        "invalid_semantics",
    ),
    (
        "an unknown body key",
        "POST",
        "/v1/answer",
        b'{"question": "q", "extra": 1}',
        422,
        "invalid_request",
    ),
    (
        "an oversized body",
        "POST",
        "/v1/answer",
        json.dumps({"question": "x" * (1024 * 1024)}).encode(),
        413,
        "request_too_large",
    ),
    (
        "an unknown session",
        "POST",
        "/v1/sessions/no-such-session/follow-up",
        b'{"question": "q"}',
        404,
        "unknown_session",
    ),
    ("an unknown ref", "GET", "/v1/evidence/ev:0000", b"", 404, "unknown_ref"),
    ("limit over 1200", "GET", "/v1/evidence/ev:0000?limit=1201", b"", 422, "invalid_parameter"),
    ("limit zero", "GET", "/v1/evidence/ev:0000?limit=0", b"", 422, "invalid_parameter"),
    ("a negative offset", "GET", "/v1/evidence/ev:0000?offset=-1", b"", 422, "invalid_parameter"),
    ("offset not a number", "GET", "/v1/evidence/ev:0000?offset=x", b"", 422, "invalid_parameter"),
    ("an unknown route", "GET", "/v2/answer", b"", 404, "not_found"),
    ("a wrong method", "GET", "/v1/answer", b"", 405, "method_not_allowed"),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "reason"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_input_is_a_4xx_json_error_with_a_reason(
    client: httpx.Client, method: str, path: str, body: bytes, status: int, reason: str
) -> None:
    reply = client.request(method, path, content=body or None, headers=JSON)
    assert (reply.status_code, reply.json()["error"]["reason"]) == (status, reason), reply.text
    assert set(reply.json()) == {"error"}
    assert reply.json()["error"]["message"]


def test_an_unknown_body_field_is_named_in_the_error(client: httpx.Client) -> None:
    reply = client.post("/v1/answer", json={"q": "What does the verifier check?"})
    assert reply.status_code == 422
    assert reply.json()["error"] == {
        "reason": "invalid_question",
        "message": "question: Field required; q: unknown field",
    }


def test_a_chunked_body_over_the_limit_is_refused_as_it_arrives(client: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"question": "'
        for _ in range(40):
            yield b"x" * 32 * 1024
        yield b'"}'

    reply = client.post("/v1/answer", content=chunks(), headers=JSON)
    assert reply.status_code == 413
    assert reply.json()["error"]["reason"] == "request_too_large"


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=10,
)
SEMANTICS = st.fixed_dictionaries(
    {}, optional={name: JSON_VALUES | st.text(max_size=20) for name in QuerySemantics.model_fields}
)
BODIES = JSON_VALUES | st.fixed_dictionaries(
    {"question": JSON_VALUES | st.text(max_size=60)},
    optional={"semantics": SEMANTICS | JSON_VALUES},
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=BODIES)
def test_any_json_body_gets_an_answer_or_a_4xx_never_a_5xx(client: httpx.Client, body: Any) -> None:
    reply = client.post("/v1/answer", content=json.dumps(body).encode(), headers=JSON)
    assert reply.status_code < 500, reply.text
    if reply.status_code >= 400:
        assert set(reply.json()["error"]) == {"reason", "message"}
    else:
        assert reply.json()["status"] in {"answered", "insufficient_evidence", "clarify"}


# -- load, deadlines and shutdown over a slow world --------------------------------------------


@pytest.fixture
def world() -> Iterator[World]:
    with World() as opened:
        yield opened


def test_a_second_concurrent_question_is_a_quick_503_with_retry_after(world: World) -> None:
    settings = slow_world_settings(world, 1500, max_concurrent_questions=1, queue_timeout_s=0.2)
    with (
        ServerThread(ExternalQueryService(settings)) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        first = pool.submit(client.post, "/v1/answer", json={"question": QUESTION})
        while server.service.questions.active == 0:
            time.sleep(0.005)
        started = time.monotonic()
        second = client.post("/v1/answer", json={"question": QUESTION})
        took = time.monotonic() - started
        assert first.result().json()["reason"] != "overloaded"
        overloaded = metric(
            client,
            "external_query_questions_total",
            status="insufficient_evidence",
            reason="overloaded",
        )
    assert second.status_code == 503
    assert second.json()["error"]["reason"] == "overloaded"
    assert second.headers["Retry-After"] == "1"  # queue_timeout_s 0.2, in whole seconds
    assert took < 1.0
    assert overloaded == 1


def test_a_question_past_the_request_deadline_is_a_504_json_error(world: World) -> None:
    settings = slow_world_settings(world, 3000).model_copy(
        update={"server": Settings().server.model_copy(update={"request_deadline_s": 0.3})}
    )
    with ServerThread(ExternalQueryService(settings)) as server:
        started = time.monotonic()
        reply = httpx.post(f"{server.url}/v1/answer", json={"question": QUESTION}, timeout=30)
        took = time.monotonic() - started
        active = server.service.questions.active
    assert reply.status_code == 504
    assert reply.json()["error"]["reason"] == "deadline_exceeded"
    assert took < 2.0
    assert active == 0  # the question was cancelled and gave its slot back


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def _settled(before: set[threading.Thread]) -> set[str]:
    """Names of threads started since ``before`` still alive after a short wait."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = {thread.name for thread in _threads() - before if thread.is_alive()}
        if not left:
            break
        time.sleep(0.05)
    return left


@pytest.mark.parametrize("grace_s", [10.0, 0.0], ids=["finishes", "cancels"])
def test_stopping_the_server_with_a_question_in_flight_ends_cleanly(grace_s: float) -> None:
    before = _threads()
    with World() as world:
        settings = slow_world_settings(world, 1000)
        settings = settings.model_copy(
            update={"server": settings.server.model_copy(update={"shutdown_grace_s": grace_s})}
        )
        server = ServerThread(ExternalQueryService(settings)).start()
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(
                httpx.post, f"{server.url}/v1/answer", json={"question": QUESTION}, timeout=30
            )
            while server.service.questions.active == 0:
                time.sleep(0.005)
            started = time.monotonic()
            server.stop()
            stopped_in = time.monotonic() - started
            if grace_s:
                reply = pending.result()
                assert reply.status_code == 200
                assert reply.json()["reason"] != "overloaded"
            else:
                reply = pending.result()
                assert reply.status_code == 503
                assert reply.json()["error"]["reason"] == "shutting_down"
                assert stopped_in < 1.0  # cancelled, not waited for
        assert server.service.questions.active == 0
        with pytest.raises(ServiceClosed):
            server.service.answer(QUESTION)
    assert _settled(before) == set()


def test_the_server_warms_the_analysis_workers_before_any_question(tmp_path: Path) -> None:
    docs = write_docs(tmp_path)
    settings = Settings.from_mapping({"analysis": {"processes": 1}}).with_docs(docs)
    service = ExternalQueryService(settings)
    assert not service.analysis.started  # nothing starts before the app does
    with ServerThread(service) as server:
        assert httpx.get(f"{server.url}/healthz").status_code == 200
        deadline = time.monotonic() + 60
        while service.analysis.ready < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert service.analysis.ready == 1
        workers = service.analysis.pids()
    assert service.analysis.pids() == ()
    assert all(not Path(f"/proc/{pid}").exists() for pid in workers)


def test_an_app_asked_not_to_warm_up_starts_no_worker(tmp_path: Path) -> None:
    from external_query_service.server import create_app

    service = ExternalQueryService(
        Settings.from_mapping({"analysis": {"processes": 1}}).with_docs(write_docs(tmp_path))
    )
    with TestClient(create_app(service, warm_up=False)) as client:
        assert client.get("/healthz").status_code == 200
        assert not service.analysis.started
