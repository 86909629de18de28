"""A service you can put on a network, over real HTTP (uvicorn on 127.0.0.1): API keys, limits
per key, the Host allow-list, CORS, request ids and the per-answer log line."""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from external_query_service import ExternalQueryService, Settings
from external_query_service.cli import main
from external_query_service.testing import World
from tests.support.air_show import QUESTION, slow_world_settings
from tests.support.serving import DOCS, DOCS_QUESTION, write_docs

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from external_query_service.server import ServerThread
from external_query_service.server._access import KeyRing, TokenBuckets
from external_query_service.server._hosts import host_name

KEY = "k-" + "s3cret" * 4
OTHER_KEY = "k-other-key-0123456789"
ANSWER_LOG = "external_query_service.server.answers"


def digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def docs_service(folder: Path, **server: Any) -> ExternalQueryService:
    # Pages analysed in a thread: no worker processes warmed up for an access rule.
    settings = Settings.from_mapping({"server": server, "analysis": {"processes": 0}})
    settings = settings.with_docs(write_docs(folder))
    return ExternalQueryService(settings)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """Keys by digest (one of them) and by environment variable; CORS for one origin."""
    folder = tmp_path_factory.mktemp("docs")
    service = docs_service(
        folder,
        api_keys_env="EQ_TEST_KEYS",
        api_key_hashes=[digest(KEY)],
        cors_origins=["https://app.example"],
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EQ_TEST_KEYS", f" {OTHER_KEY} , ")
        server = ServerThread(service)  # the app reads the variable as it is made
    with server:
        yield server


def post_answer(url: str, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/answer",
        json={"question": DOCS_QUESTION, "semantics": DOCS},
        headers=headers,
        timeout=30,
    )


# -- keys --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}, {"Authorization": KEY}],
    ids=["none", "wrong-bearer", "wrong-x-api-key", "no-bearer-scheme"],
)
def test_a_missing_or_wrong_key_is_401_with_the_bearer_challenge(
    keyed: ServerThread, headers: dict[str, str]
) -> None:
    reply = post_answer(keyed.url, **headers)
    assert reply.status_code == 401
    assert reply.headers["WWW-Authenticate"] == "Bearer"
    assert reply.json() == {
        "error": {"reason": "unauthorized", "message": "a valid API key is required"}
    }
    assert KEY not in reply.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Bearer {KEY}"},
        {"X-API-Key": KEY},
        {"authorization": f"bearer {OTHER_KEY}"},
    ],
    ids=["bearer-digest-key", "x-api-key", "env-key"],
)
def test_a_right_key_answers(keyed: ServerThread, headers: dict[str, str]) -> None:
    reply = post_answer(keyed.url, **headers)
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == "answered"


def test_health_and_readiness_stay_open_and_metrics_need_a_key(keyed: ServerThread) -> None:
    assert httpx.get(f"{keyed.url}/healthz").status_code == 200
    assert httpx.get(f"{keyed.url}/readyz").status_code == 200
    assert httpx.get(f"{keyed.url}/metrics").status_code == 401
    metrics = httpx.get(f"{keyed.url}/metrics", headers={"X-API-Key": KEY})
    assert metrics.status_code == 200
    assert 'external_query_request_errors_total{reason="unauthorized"}' in metrics.text
    for secret in (KEY, OTHER_KEY, digest(KEY), digest(OTHER_KEY)):
        assert secret not in metrics.text  # refusals are counted by reason, never by key


def test_metrics_public_opens_only_metrics(tmp_path: Path) -> None:
    service = docs_service(tmp_path, api_key_hashes=[digest(KEY)], metrics_public=True)
    with ServerThread(service) as server:
        assert httpx.get(f"{server.url}/metrics").status_code == 200
        assert post_answer(server.url).status_code == 401


def test_a_cors_preflight_needs_no_key_and_names_the_allowed_headers(keyed: ServerThread) -> None:
    reply = httpx.options(
        f"{keyed.url}/v1/answer",
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, x-request-id",
        },
    )
    assert reply.status_code == 200, reply.text
    assert reply.headers["access-control-allow-origin"] == "https://app.example"
    assert set(reply.headers["access-control-allow-methods"].split(", ")) == {"GET", "POST"}
    allowed = {
        item.strip().lower() for item in reply.headers["access-control-allow-headers"].split(",")
    }
    assert {"authorization", "x-api-key", "content-type", "x-request-id", "traceparent"} <= allowed
    # An origin not listed gets no CORS grant.
    stranger = httpx.options(
        f"{keyed.url}/v1/answer",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in stranger.headers


def test_without_cors_origins_a_browser_gets_no_grant(tmp_path: Path) -> None:
    with ServerThread(docs_service(tmp_path)) as server:
        reply = post_answer(server.url, Origin="https://app.example")
        assert reply.status_code == 200
        assert "access-control-allow-origin" not in reply.headers


def test_a_refused_cors_preflight_is_a_json_error(keyed: ServerThread) -> None:
    reply = httpx.options(
        f"{keyed.url}/v1/answer",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert reply.status_code == 400
    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == {
        "error": {
            "reason": "cors_not_allowed",
            "message": "this CORS preflight is not allowed: origin",
        }
    }
    assert "access-control-allow-origin" not in reply.headers
    assert reply.headers["X-Request-ID"]


@pytest.mark.parametrize("path", ["/openapi.json", "/docs", "/redoc"])
def test_the_openapi_document_and_its_pages_need_no_key_and_spend_no_limit(
    tmp_path: Path, path: str
) -> None:
    service = docs_service(tmp_path, api_key_hashes=[digest(KEY)], requests_per_minute=1)
    with ServerThread(service) as server:
        replies = [httpx.get(f"{server.url}{path}") for _ in range(3)]
        answered = post_answer(server.url, **{"X-API-Key": KEY})  # its one request is unspent
    assert [reply.status_code for reply in replies] == [200, 200, 200]
    assert "X-RateLimit-Remaining" not in replies[0].headers
    assert answered.status_code == 200
    if path == "/openapi.json":
        assert "/v1/chat/completions" in replies[0].json()["paths"]
    else:
        assert "/openapi.json" in replies[0].text


def test_docs_off_serves_neither_the_document_nor_its_pages(tmp_path: Path) -> None:
    service = docs_service(tmp_path, api_key_hashes=[digest(KEY)], docs=False)
    with ServerThread(service) as server:
        for path in ("/openapi.json", "/docs", "/redoc"):
            reply = httpx.get(f"{server.url}{path}", headers={"X-API-Key": KEY})
            assert reply.status_code == 404, path
            assert reply.json()["error"]["reason"] == "not_found"


def test_an_unknown_route_is_404_without_a_key_and_a_known_one_still_401(
    keyed: ServerThread,
) -> None:
    unknown = httpx.get(f"{keyed.url}/v2/answer")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["reason"] == "not_found"
    wrong_method = httpx.get(f"{keyed.url}/v1/answer")  # the route exists: the key comes first
    assert wrong_method.status_code == 401
    assert httpx.get(f"{keyed.url}/v1/sessions/x/follow-up").status_code == 401


def test_the_openapi_document_declares_both_ways_to_send_a_key(keyed: ServerThread) -> None:
    document = httpx.get(f"{keyed.url}/openapi.json").json()
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer"}
    assert schemes["apiKey"] == {"type": "apiKey", "in": "header", "name": "X-API-Key"}
    assert document["security"] == [{"bearer": []}, {"apiKey": []}]
    assert document["paths"]["/healthz"]["get"]["security"] == []
    assert "401" in document["paths"]["/v1/answer"]["post"]["responses"]


def test_a_keyring_reads_keys_from_the_environment_and_digests_only() -> None:
    from external_query_service.settings import ServerSettings

    settings = ServerSettings(
        api_keys_env="EQ_KEYS", api_key_hashes=(digest("b").upper().replace("SHA256", "sha256"),)
    )
    ring = KeyRing.from_settings(settings, {"EQ_KEYS": "a, ,c"})
    assert ring.identify("a") == digest("a")
    assert ring.identify("b") == digest("b")
    assert ring.identify("c") == digest("c")
    assert ring.identify("d") is None
    assert ring.identify("") is None
    assert not KeyRing.from_settings(ServerSettings(), {}).configured


def test_a_key_hash_that_is_not_sha256_hex_is_a_settings_error() -> None:
    from external_query_service.errors import SettingsError

    with pytest.raises(SettingsError, match="api_key_hashes"):
        Settings.from_mapping({"server": {"api_key_hashes": ["md5:abc"]}})


def test_serving_beyond_loopback_without_keys_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = str(write_docs(tmp_path))
    assert main(["serve", "--docs", docs, "--host", "0.0.0.0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no API key configured" in err
    assert "--insecure-no-auth" in err


# -- limits --------------------------------------------------------------------------------------


def test_over_the_rate_is_429_with_retry_after_per_key(tmp_path: Path) -> None:
    service = docs_service(
        tmp_path, api_key_hashes=[digest(KEY), digest(OTHER_KEY)], requests_per_minute=2
    )
    with ServerThread(service) as server:
        first = [post_answer(server.url, **{"X-API-Key": KEY}).status_code for _ in range(2)]
        refused = post_answer(server.url, **{"X-API-Key": KEY})
        other = post_answer(server.url, **{"X-API-Key": OTHER_KEY})  # a bucket of its own
        metrics = httpx.get(f"{server.url}/metrics", headers={"X-API-Key": OTHER_KEY}).text
    assert first == [200, 200]
    assert refused.status_code == 429
    assert refused.json()["error"]["reason"] == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 30  # one token comes back each 30 s
    assert other.status_code == 200
    assert 'external_query_request_errors_total{reason="rate_limited"} 1.0' in metrics


def test_a_token_bucket_refills_at_the_rate_with_a_burst_of_the_rate() -> None:
    now = [0.0]
    buckets = TokenBuckets(60, clock=lambda: now[0])
    spent = [buckets.take("a") for _ in range(60)]
    assert [item.wait_s for item in spent] == [0.0] * 60
    assert [item.remaining for item in spent] == list(range(59, -1, -1))
    assert spent[-1].reset_s == pytest.approx(60.0)  # one token a second, 60 to refill
    assert buckets.take("a").wait_s == pytest.approx(1.0)
    now[0] += 0.5
    assert buckets.take("a").wait_s == pytest.approx(0.5)
    now[0] += 0.5
    assert buckets.take("a") == (0.0, 0, pytest.approx(60.0))
    assert buckets.take("b") == (0.0, 59, pytest.approx(1.0))


def rate_headers(reply: httpx.Response) -> tuple[int, int, int]:
    names = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
    limit, remaining, reset = (int(reply.headers[name]) for name in names)
    return limit, remaining, reset


@pytest.mark.parametrize("shared", [False, True], ids=["in-memory", "redis"])
def test_a_limited_answer_says_its_rate_what_is_left_and_when_it_is_full(
    tmp_path: Path, request: pytest.FixtureRequest, shared: bool
) -> None:
    cache = {}
    if shared:
        cache = {"url": request.getfixturevalue("redis_url")}
        cache["key_prefix"] = request.getfixturevalue("prefix")
        # Only the rate limiter's counters go there; no page is shared.
        cache["allow_unsigned"] = True
    settings = Settings.from_mapping(
        {
            "server": {"api_key_hashes": [digest(KEY)], "requests_per_minute": 3},
            "analysis": {"processes": 0},
            **({"cache": cache} if cache else {}),
        }
    ).with_docs(write_docs(tmp_path))
    with ServerThread(ExternalQueryService(settings)) as server:
        replies = [post_answer(server.url, **{"X-API-Key": KEY}) for _ in range(4)]
        health = httpx.get(f"{server.url}/healthz")
    assert [reply.status_code for reply in replies] == [200, 200, 200, 429]
    seen = [rate_headers(reply) for reply in replies]
    assert [(limit, left) for limit, left, _ in seen] == [(3, 2), (3, 1), (3, 0), (3, 0)]
    # One token each 20 s: full again in 20, 40, 60 s (a little less as they refill).
    assert 19 <= seen[0][2] <= 20
    assert 39 <= seen[1][2] <= 40
    assert 59 <= seen[2][2] <= 60
    assert "X-RateLimit-Limit" not in health.headers  # an open route counts against nothing


def test_more_concurrent_requests_than_a_key_may_have_are_429(world: World) -> None:
    settings = slow_world_settings(world, 1500)
    settings = settings.model_copy(
        update={
            "server": settings.server.model_copy(
                update={"api_key_hashes": (digest(KEY),), "max_concurrent_per_key": 1}
            )
        }
    )
    with ServerThread(ExternalQueryService(settings)) as server:
        results: list[httpx.Response] = []
        slow = threading.Thread(
            target=lambda: results.append(
                httpx.post(
                    f"{server.url}/v1/answer",
                    json={"question": QUESTION},
                    headers={"X-API-Key": KEY},
                    timeout=30,
                )
            )
        )
        slow.start()
        deadline = time.monotonic() + 10
        while not server.service.questions.active and time.monotonic() < deadline:
            time.sleep(0.02)
        second = httpx.post(
            f"{server.url}/v1/answer",
            json={"question": QUESTION},
            headers={"X-API-Key": KEY},
            timeout=30,
        )
        slow.join(30)
    assert second.status_code == 429
    assert second.json()["error"]["reason"] == "too_many_concurrent"
    assert second.headers["Retry-After"] == "1"
    assert results[0].status_code == 200  # the slot is given back when it is answered


@pytest.fixture
def world() -> Iterator[World]:
    with World() as opened:
        yield opened


# -- the Host allow-list -----------------------------------------------------------------------


def test_a_host_that_is_not_allowed_is_400(keyed: ServerThread) -> None:
    reply = httpx.get(f"{keyed.url}/healthz", headers={"Host": "evil.example"})
    assert reply.status_code == 400
    assert reply.json()["error"]["reason"] == "host_not_allowed"
    rebinding = httpx.get(f"{keyed.url}/healthz", headers={"Host": "evil.example:8080"})
    assert rebinding.status_code == 400
    for host in (f"127.0.0.1:{keyed.port}", "localhost", f"LOCALHOST:{keyed.port}"):
        assert httpx.get(f"{keyed.url}/healthz", headers={"Host": host}).status_code == 200


def test_allowed_hosts_replace_the_loopback_names(tmp_path: Path) -> None:
    with ServerThread(docs_service(tmp_path, allowed_hosts=["api.example"])) as server:
        assert (
            httpx.get(f"{server.url}/healthz", headers={"Host": "api.example"}).status_code == 200
        )
        assert httpx.get(f"{server.url}/healthz").status_code == 400  # 127.0.0.1 is not listed


@pytest.mark.parametrize(
    ("header", "name"),
    [("Example.COM:80", "example.com"), ("[::1]:8080", "::1"), ("[::1]", "::1"), ("host", "host")],
)
def test_host_names_lose_their_port(header: str, name: str) -> None:
    assert host_name(header) == name


# -- request ids and the answer's log line -------------------------------------------------------


def test_a_request_id_is_echoed_in_the_audit_and_the_log_line(
    keyed: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ANSWER_LOG)
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    reply = post_answer(
        keyed.url,
        **{
            "X-API-Key": KEY,
            "X-Request-ID": "req-42 from the backend",
            "traceparent": f"00-{trace}-00f067aa0ba902b7-01",
        },
    )
    assert reply.status_code == 200
    assert reply.headers["X-Request-ID"] == "req-42 from the backend"
    question = next(e for e in reply.json()["audit"]["events"] if e["event"] == "question")
    assert question["detail"]["request_id"] == "req-42 from the backend"
    assert question["detail"]["trace_id"] == trace
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == ANSWER_LOG]
    line = next(item for item in lines if item["request_id"] == "req-42 from the backend")
    assert line["trace_id"] == trace
    assert line["status"] == "answered"
    assert line["reason"] is None
    assert line["adapters"] == {"docs": "ok"}
    assert line["route"] == "answer"
    assert isinstance(line["pages"], int)
    assert isinstance(line["latency_ms"], int)
    assert "question" not in line  # log_questions is off
    assert KEY not in caplog.text


def test_every_response_carries_a_request_id_refusals_included(keyed: ServerThread) -> None:
    refused = post_answer(keyed.url)
    assert refused.status_code == 401
    assert len(refused.headers["X-Request-ID"]) == 32
    other = httpx.get(f"{keyed.url}/healthz", headers={"Host": "evil.example"})
    assert other.headers["X-Request-ID"] != refused.headers["X-Request-ID"]


@pytest.mark.parametrize(
    "given", ["x" * 129, "tab\there", "é"], ids=["long", "control", "non-ascii"]
)
def test_a_request_id_that_is_not_printable_or_too_long_is_400(
    keyed: ServerThread, given: str
) -> None:
    reply = httpx.get(f"{keyed.url}/healthz", headers=[(b"X-Request-ID", given.encode("utf-8"))])
    assert reply.status_code == 400
    assert reply.json()["error"]["reason"] == "invalid_request_id"
    assert reply.headers["X-Request-ID"] != given


def test_log_questions_puts_the_question_in_the_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ANSWER_LOG)
    with ServerThread(docs_service(tmp_path, log_questions=True)) as server:
        assert post_answer(server.url).status_code == 200
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == ANSWER_LOG]
    assert lines[-1]["question"] == DOCS_QUESTION


# -- slow clients ----------------------------------------------------------------------------------


def test_a_body_that_trickles_past_body_timeout_is_408(tmp_path: Path) -> None:
    with (
        ServerThread(docs_service(tmp_path, body_timeout_s=0.5)) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw,
    ):
        raw.sendall(
            b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"question"'
        )
        reply = _whole_reply(raw)
    assert reply.startswith("HTTP/1.1 408")
    assert "body_timeout" in reply


def _whole_reply(raw: socket.socket) -> str:
    """One HTTP reply read off ``raw`` to the end of its body: the head and the body may come
    in separate segments."""
    received = b""
    while b"\r\n\r\n" not in received and (chunk := raw.recv(4096)):
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length and (chunk := raw.recv(4096)):
        body += chunk
    return (head + b"\r\n\r\n" + body).decode()


def test_a_connection_that_never_finishes_its_headers_is_closed(tmp_path: Path) -> None:
    with (
        ServerThread(docs_service(tmp_path, header_timeout_s=0.5)) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw,
    ):
        started = time.monotonic()
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line: unfinished
        assert raw.recv(4096) == b""  # closed by the server
        assert 0.4 < time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("path", "query", "logged"),
    [
        ("/healthz", b"", "/healthz"),
        ("/v1/evidence/ev:1", b"offset=10&limit=50", "/v1/evidence/ev:1?[query redacted]"),
        ("/v1/answer", b"api_key=s3cret&token=t", "/v1/answer?[query redacted]"),
        # A bare name can be the secret too.
        ("/x", b"s3cret", "/x?[query redacted]"),
    ],
)
def test_the_access_line_never_logs_a_query_string(path: str, query: bytes, logged: str) -> None:
    from external_query_service.server._logs import logged_target

    assert logged_target(path, query) == logged
