"""Brave and Tavily: keyed live search over loopback, in their real formats, with failover,
the provider error mapping, and keys that never leave the request header."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from external_query_service.testing import RecordedRequest, Reply, World, json_reply
from external_query_service.testing._recorder import record_world
from external_query_service.testing.content import article, hit, tavily_body
from external_query_service.testing.world import BRAVE_URL, TAVILY_URL
from tests.support.keyed_search import (
    BRAVE_KEY,
    HARBOUR,
    PARAGRAPH,
    PORT_NEWS,
    QUERY,
    QUESTION,
    SEMANTICS,
    TAVILY_KEY,
    serve,
)
from tests.support.world import NOW

BRAVE_SEARCH = f"{BRAVE_URL}/web/search"
TAVILY_SEARCH = f"{TAVILY_URL}/search"


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", BRAVE_KEY)
    monkeypatch.setenv("TAVILY_API_KEY", TAVILY_KEY)


@pytest.fixture
def world(keys: None, https_worlds: None) -> Iterator[World]:
    with World(now=NOW) as world:
        serve(world)
        yield world


def page_requests(world: World) -> list[RecordedRequest]:
    return [r for r in world.requests if r.path in ("/throughput", "/zhanjiang")]


def test_brave_answers_from_fetched_pages_with_the_key_only_in_its_header(world: World) -> None:
    with world.service(world.brave()) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    assert answer.status == "answered", answer.attempts
    assert {e.url for e in answer.evidence} == {PORT_NEWS, HARBOUR}
    assert {e.basis for e in answer.evidence} == {"page_body"}
    assert answer.attempts[0].source == "api.search.brave.com"
    [search] = world.requests_to("/res/v1/web/search")
    assert search.method == "GET"
    assert search.headers["x-subscription-token"] == BRAVE_KEY
    assert search.headers["accept"] == "application/json"
    assert search.query == {
        "q": [QUERY],
        "count": ["10"],
        "search_lang": ["zh-hans"],
        "freshness": ["pm"],  # 2026-11-15 is 15 days before the world's today
    }
    assert BRAVE_KEY not in search.raw_query
    assert len(page_requests(world)) == 2


def test_tavily_answers_from_fetched_pages_with_a_bearer_key(world: World) -> None:
    with world.service(world.tavily()) as service:
        answer = service.answer(QUESTION, {**SEMANTICS, "query_kind": "news"})

    assert answer.status == "answered", answer.attempts
    assert {e.url for e in answer.evidence} == {PORT_NEWS, HARBOUR}
    [search] = world.requests_to("/search", host="api.tavily.com")
    assert search.method == "POST"
    assert search.headers["authorization"] == f"Bearer {TAVILY_KEY}"
    assert json.loads(search.body) == {
        "query": QUERY,
        "max_results": 10,
        "search_depth": "basic",
        "topic": "news",
        "time_range": "month",
    }
    assert len(page_requests(world)) == 2


def test_tavily_provider_content_stands_in_for_the_page_and_says_so(world: World) -> None:
    raw = (f"湛江港吞吐量创新高\n{PARAGRAPH}", None)
    hits = [
        hit(PORT_NEWS, "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"),
        hit(HARBOUR, "湛江港航线", "湛江港集装箱航线", "2026-11-18"),
    ]
    world.tavily_results(QUERY, hits, raw=raw)
    with world.service(world.tavily(use_provider_content=True)) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    assert answer.status == "answered", answer.attempts
    by_url = {e.url: e for e in answer.evidence}
    assert by_url[PORT_NEWS].basis == "provider_text"
    assert by_url[HARBOUR].basis == "page_body"  # no raw content: fetched as usual
    assert [r.path for r in page_requests(world)] == ["/zhanjiang"]
    assert any("搜索服务商提取" in note for note in answer.uncertainties)
    assert json.loads(world.requests_to("/search")[0].body)["include_raw_content"] is True
    assert (
        service.store.quote(
            by_url[PORT_NEWS].ref or "", by_url[PORT_NEWS].offset, by_url[PORT_NEWS].length
        )
        == by_url[PORT_NEWS].snippet
    )


@pytest.mark.parametrize(
    ("failing", "fault_at"),
    [("brave", f"{BRAVE_SEARCH}?q={QUERY}"), ("tavily", TAVILY_SEARCH)],
)
def test_a_failing_provider_fails_over_to_the_other(
    world: World, failing: str, fault_at: str
) -> None:
    world.fault(fault_at, "http_500", match={"query": QUERY} if failing == "tavily" else None)
    # Ids order the tie: the failing provider is tried first.
    adapters = [world.brave("a-brave" if failing == "brave" else "b-brave")]
    adapters.append(world.tavily("a-tavily" if failing == "tavily" else "b-tavily"))
    with world.service(*adapters) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    assert answer.status == "answered"
    first, second = answer.attempts
    assert (first.status, first.reason, first.failure) == (
        "failed",
        "upstream_status_500",
        "transient",
    )
    assert first.adapter_id.endswith(failing)
    assert second.status == "ok"
    assert {e.adapter_id for e in answer.evidence} == {second.adapter_id}


def _status(status: int, **headers: str) -> Reply:
    return json_reply({"error": {"code": "E", "detail": "refused"}}, status=status, headers=headers)


@pytest.mark.parametrize("provider", ["brave", "tavily"])
@pytest.mark.parametrize(
    ("status", "failure", "reason"),
    [
        (401, "misconfigured", "provider_misconfigured"),
        (403, "misconfigured", "provider_misconfigured"),
        (422, "misconfigured", "provider_misconfigured"),
        (500, "transient", "all_providers_failed"),
        (503, "transient", "all_providers_failed"),
    ],
)
def test_provider_statuses_map_to_failure_classes_and_reasons(
    world: World, provider: str, status: int, failure: str, reason: str
) -> None:
    if provider == "brave":
        world.route(f"{BRAVE_SEARCH}?q={QUERY}", _status(status))
        adapter = world.brave()
    else:
        world.route(TAVILY_SEARCH, _status(status), match={"query": QUERY})
        adapter = world.tavily()
    with world.service(adapter) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    [attempt] = answer.attempts
    assert (attempt.status, attempt.reason, attempt.failure) == (
        "failed",
        f"upstream_status_{status}",
        failure,
    )
    assert (answer.status, answer.reason) == ("insufficient_evidence", reason)
    assert answer.retryable is (failure == "transient")


@pytest.mark.parametrize("provider", ["brave", "tavily"])
def test_a_missing_key_variable_keeps_the_rank_and_fails_the_attempt_as_misconfigured(
    world: World, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(f"{provider.upper()}_API_KEY")
    adapter = world.brave() if provider == "brave" else world.tavily()
    with world.service(adapter, {"kind": "searxng", "id": "z-searx"}) as service:
        assert service.gateway.readiness()[provider].ready
        answer = service.answer(QUESTION, SEMANTICS)

    first = answer.attempts[0]
    assert (first.adapter_id, first.rank, first.status) == (provider, 1, "failed")
    assert (first.reason, first.failure) == ("api_key_missing", "misconfigured")
    assert answer.attempts[1].adapter_id == "z-searx"  # failed over
    assert not world.requests_to("/search", host=f"api.{provider}.com")
    assert not world.requests_to("/res/v1/web/search")


def _throttled_once(retry_after: str) -> Any:
    calls: list[float] = []

    def handler(request: RecordedRequest) -> Reply:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return _status(429, **{"Retry-After": retry_after})
        return json_reply(tavily_body(QUERY, [hit(PORT_NEWS, "湛江港吞吐量", "湛江港货物吞吐量")]))

    handler.calls = calls  # type: ignore[attr-defined]
    return handler


def test_a_429_is_retried_after_its_retry_after_when_it_fits_the_deadline(world: World) -> None:
    handler = _throttled_once("1")
    world.route(TAVILY_SEARCH, handler, match={"query": QUERY})
    with world.service(world.tavily()) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    assert answer.status == "answered", answer.attempts
    first, second = handler.calls
    assert second - first >= 1.0


def test_a_429_whose_wait_outlasts_the_deadline_fails_over_at_once(world: World) -> None:
    handler = _throttled_once("3600")
    world.route(TAVILY_SEARCH, handler, match={"query": QUERY})
    started = time.monotonic()
    with world.service(world.tavily("a-tavily"), world.brave("b-brave")) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    assert time.monotonic() - started < 5
    first = answer.attempts[0]
    assert (first.reason, first.failure) == ("upstream_status_429", "transient")
    assert len(handler.calls) == 1
    assert answer.status == "answered"  # from Brave


def test_the_key_never_appears_in_answers_audits_worlds_or_logs(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    outputs: list[str] = []
    world.route(BRAVE_SEARCH + "?q=refused", _status(401))
    with world.service(world.brave(), world.tavily(use_provider_content=True)) as service:
        for semantics in (SEMANTICS, {**SEMANTICS, "search_queries": ["refused"]}):
            answer = service.answer(QUESTION, semantics)
            outputs.append(answer.model_dump_json())
            outputs.append(json.dumps(answer.audit.model_dump(mode="json"), ensure_ascii=False))
    settings = world.settings(world.brave(), world.tavily())
    recorded = record_world(QUESTION, SEMANTICS, settings, tmp_path / "world", now=NOW)
    outputs.append(recorded.answer.model_dump_json())
    outputs.extend(
        path.read_text(encoding="utf-8", errors="replace")
        for path in (tmp_path / "world").rglob("*")
        if path.is_file()
    )
    outputs.append(caplog.text)

    assert len(outputs) > 6
    for key in (BRAVE_KEY, TAVILY_KEY):
        assert not [text[:80] for text in outputs if key in text]
    # The key did travel where it belongs.
    assert any(r.headers.get("x-subscription-token") == BRAVE_KEY for r in world.requests)


ECHO = "https://echo.example.net/zhanjiang"


@pytest.mark.parametrize("adapter", ["brave", "tavily"])
def test_a_provider_echoing_its_key_in_a_hit_gets_that_hit_dropped_unseen(
    world: World, adapter: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = BRAVE_KEY if adapter == "brave" else TAVILY_KEY
    # The echoed key in a URL (percent-encoded in part), a title and a snippet: three hits.
    leaky = f"{ECHO}?token=" + key.replace("-", "%2D", 1)
    full_width = "".join(chr(ord(c) + 0xFEE0) for c in key)
    world.route(ECHO, Reply(body=article("湛江港吞吐量", [PARAGRAPH], published="2026-11-20")))
    hits = [
        hit(leaky, "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"),
        hit(ECHO + "/t", f"湛江港 {key}", "湛江港货物吞吐量", "2026-11-20"),
        hit(ECHO + "/s", "湛江港", f"湛江港货物吞吐量 {full_width}", "2026-11-20"),
        hit(PORT_NEWS, "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"),
    ]
    if adapter == "brave":
        world.brave_results(QUERY, hits)
        options = world.brave()
    else:
        world.tavily_results(QUERY, hits)
        options = world.tavily()
    with world.service(options) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    assert answer.status == "answered", answer.attempts
    assert {e.url for e in answer.evidence} == {PORT_NEWS}
    audit = json.dumps(answer.audit.model_dump(mode="json"), ensure_ascii=False)
    for text in (answer.model_dump_json(), audit, caplog.text, answer.text):
        assert key not in text
        assert key[5:] not in text
    # Dropped before its page was asked for: nothing to cache, nothing to audit.
    assert not [r for r in world.requests if r.path.startswith("/zhanjiang")]
    assert answer.audit.named("attempt")[0].detail["secret_in_result"] == 3


def test_every_hit_echoing_the_key_leaves_an_empty_attempt_saying_so(world: World) -> None:
    world.brave_results(QUERY, [hit(f"{PORT_NEWS}?k={BRAVE_KEY}", "湛江港", "湛江港吞吐量")])
    with world.service(world.brave()) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    assert BRAVE_KEY not in answer.model_dump_json()
    attempt = answer.attempts[0]
    assert (attempt.status, attempt.reason) == ("empty", "secret_in_result")
    assert answer.audit.named("attempt")[0].detail["secret_in_result"] == 1


def _encoded_echoes(key: str) -> list[tuple[str, str, str]]:
    """(url, title, snippet) of hits that each echo ``key`` in one encoding the plain and
    once-percent-decoded check used to miss."""
    raw = key.encode()
    twice = "".join(f"%25{byte:02X}" for byte in raw)  # %-encoded, then %-encoded again
    entities = "".join(f"&#{ord(char)};" for char in key)
    standard = base64.b64encode(b"id:" + raw).decode()
    url_safe = base64.urlsafe_b64encode(b'{"k":"' + raw + b'"}').decode().rstrip("=")
    split = "\u200b".join(key)
    return [
        (f"{ECHO}/a?token={twice}", "湛江港吞吐量", "湛江港货物吞吐量"),
        (f"{ECHO}/b", f"湛江港 {entities}", "湛江港货物吞吐量"),
        (f"{ECHO}/c", "湛江港", f"湛江港货物吞吐量 {standard}"),
        (f"{ECHO}/p/{url_safe}", "湛江港", "湛江港货物吞吐量"),
        (f"{ECHO}/d", "湛江港", f"湛江港货物吞吐量 {split}"),
    ]


@pytest.mark.parametrize("adapter", ["brave", "tavily"])
def test_a_key_echoed_encoded_twice_as_entities_base64_or_split_never_reaches_the_answer(
    world: World, adapter: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = BRAVE_KEY if adapter == "brave" else TAVILY_KEY
    world.route(ECHO, Reply(body=article("湛江港吞吐量", [PARAGRAPH], published="2026-11-20")))
    echoes = _encoded_echoes(key)
    hits = [hit(url, title, snippet, "2026-11-20") for url, title, snippet in echoes]
    hits.append(hit(PORT_NEWS, "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"))
    if adapter == "brave":
        world.brave_results(QUERY, hits)
        options = world.brave()
    else:
        world.tavily_results(QUERY, hits)
        options = world.tavily()
    with world.service(options) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    assert answer.status == "answered", answer.attempts
    assert {e.url for e in answer.evidence} == {PORT_NEWS}
    assert not [r for r in world.requests if r.path.startswith("/zhanjiang")]
    assert answer.audit.named("attempt")[0].detail["secret_in_result"] == len(echoes)


def test_a_redirect_hop_carrying_the_key_is_never_requested_nor_shown(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    hidden = base64.urlsafe_b64encode(BRAVE_KEY.encode()).decode()
    # The hit is clean; its page redirects to a URL with the key in the query, then one
    # with it base64-encoded in the path; a third page echoes it in its own text.
    world.route(f"{ECHO}/go", Reply(status=302, headers={"location": f"{ECHO}/k?key={BRAVE_KEY}"}))
    world.route(f"{ECHO}/go2", Reply(status=302, headers={"location": f"{ECHO}/p/{hidden}"}))
    world.route(
        f"{ECHO}/said",
        Reply(body=article("湛江港吞吐量", [f"{PARAGRAPH} 密钥 {hidden}"], published="2026-11-20")),
    )
    world.route(ECHO, Reply(body=article("湛江港吞吐量", [PARAGRAPH], published="2026-11-20")))
    hits = [
        hit(f"{ECHO}/go", "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"),
        hit(f"{ECHO}/go2", "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"),
        hit(f"{ECHO}/said", "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"),
        hit(PORT_NEWS, "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"),
    ]
    world.brave_results(QUERY, hits)
    with world.service(world.brave()) as service:
        answer = service.answer(QUESTION, SEMANTICS)

    assert answer.status == "answered", answer.attempts
    assert {e.url for e in answer.evidence} == {PORT_NEWS}
    audit = json.dumps(answer.audit.model_dump(mode="json"), ensure_ascii=False)
    # httpcore's own DEBUG trace prints every response header as received (the redirect's
    # Location among them); every other log line is checked.
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name != "httpcore.http11")
    for text in (answer.model_dump_json(), audit, logged, answer.text):
        assert BRAVE_KEY not in text
        assert hidden not in text
    # The hops were refused before they were asked for.
    assert not [r for r in world.requests if r.path.startswith(("/zhanjiang/k", "/zhanjiang/p"))]
    failures = answer.audit.named("attempt")[0].detail["page_failures"]
    assert f"{ECHO}/go not_a_document:secret_in_result" in failures
    assert f"{ECHO}/go2 not_a_document:secret_in_result" in failures
    assert answer.audit.named("attempt")[0].detail["secret_in_result"] >= 1
