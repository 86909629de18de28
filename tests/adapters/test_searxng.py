"""The SearXNG adapter against a loopback server speaking SearXNG's JSON, pages on named sites."""

from __future__ import annotations

import asyncio
from datetime import date, timedelta
from typing import Any

import pytest

from external_query_service._audit import AuditLog
from external_query_service._clock import fixed_clock
from external_query_service._evidence_store import EvidenceStore
from external_query_service.adapters._base import AdapterOutcome, AdapterRuntime
from external_query_service.adapters._searxng import SearxngAdapter, time_range_bucket
from external_query_service.gateway._gateway import Gateway
from external_query_service.models import (
    AdapterAttempt,
    ExternalQueryPlan,
    GatherResult,
    Readiness,
    TimeRange,
)
from external_query_service.net._fetch import HttpRuntime
from external_query_service.settings import AdapterSettings, NetworkSettings
from external_query_service.testing import (
    LoopbackServer,
    RecordedRequest,
    Reply,
    article,
    hit,
    json_reply,
    searx_body,
)
from tests.support.world import NOW, closed_port

TODAY = NOW.date()
QUESTION = "湛江港今年货物吞吐量是多少？"
PORT_TEXT = "湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八，集装箱航线继续增加。"


@pytest.fixture
def loopback(shared_loopback: LoopbackServer) -> LoopbackServer:
    """This module's tests share one server (see conftest)."""
    return shared_loopback


def network(**overrides: Any) -> NetworkSettings:
    values: dict[str, Any] = {
        "allowed_networks": ["127.0.0.1/32"],
        "resolve": {"port-a.test": "127.0.0.1", "port-b.test": "127.0.0.1"},
        "timeout_s": 5.0,
        "user_agent": "eqs-review/1.0 (+https://example.invalid/bot)",
    }
    values.update(overrides)
    return NetworkSettings(**values)


def plan(**fields: Any) -> ExternalQueryPlan:
    return ExternalQueryPlan(question=QUESTION, search_queries=(QUESTION,), **fields)


def gather(
    server: LoopbackServer,
    plan_: ExternalQueryPlan,
    *,
    settings: NetworkSettings | None = None,
    base_url: str | None = None,
) -> AdapterOutcome:
    async def go() -> AdapterOutcome:
        net = settings or network()
        http = HttpRuntime(net)
        runtime = AdapterRuntime(
            network=net,
            fetcher=http.fetcher,
            endpoint=http.endpoint,
            store=EvidenceStore(),
            clock=fixed_clock(NOW),
        )
        config = AdapterSettings(
            kind="searxng", id="searx", base_url=base_url or server.url("/searx")
        )
        try:
            return await SearxngAdapter(config, runtime).gather(plan_)
        finally:
            await http.aclose()

    return asyncio.run(go())


def probe(base_url: str | None) -> Readiness:
    async def go() -> Readiness:
        http = HttpRuntime(NetworkSettings(timeout_s=5.0))
        runtime = AdapterRuntime(
            network=NetworkSettings(),
            fetcher=http.fetcher,
            endpoint=http.endpoint,
            store=EvidenceStore(),
            clock=fixed_clock(NOW),
        )
        adapter = SearxngAdapter(
            AdapterSettings(kind="searxng", id="searx", base_url=base_url), runtime
        )
        try:
            return await adapter.probe()
        finally:
            await http.aclose()

    return asyncio.run(go())


def serve(server: LoopbackServer, results: list[dict[str, Any]], **extra: Any) -> None:
    def answer(request: RecordedRequest) -> Reply:
        return json_reply({**searx_body(request.query["q"][0], results), **extra})

    server.route("/searx/search", answer)


def port_page(server: LoopbackServer, site: str = "port-a.test") -> str:
    body = article("湛江港吞吐量", [PORT_TEXT], published="2026-11-29")
    server.route("/news", Reply(body=body), host=site)
    return f"http://{site}:{server.port}/news"


# -- the search request -----------------------------------------------------------------------


def test_the_search_sends_what_a_limited_instance_accepts(loopback: LoopbackServer) -> None:
    serve(loopback, [])
    gather(loopback, plan())
    (search,) = loopback.requests_to("/searx/search")
    assert search.query["q"] == [QUESTION]
    assert search.query["format"] == ["json"]
    assert search.query["language"] == ["zh-CN"]
    assert "time_range" not in search.query
    assert "categories" not in search.query
    # SearXNG's bot limiter turns away a request without text/html in Accept, an
    # Accept-Language, gzip or deflate, and a User-Agent that is not a bare library name.
    assert "text/html" in search.headers["accept"]
    assert "application/json" in search.headers["accept"]
    assert search.headers["accept-language"].startswith("zh-CN")
    assert "gzip" in search.headers["accept-encoding"]
    assert search.headers["user-agent"] == "eqs-review/1.0 (+https://example.invalid/bot)"
    assert search.headers.get("connection", "").lower() != "close"


@pytest.mark.parametrize(
    ("start", "bucket"),
    [
        (TODAY, "day"),
        (TODAY - timedelta(days=3), "week"),
        (TODAY - timedelta(days=6), "week"),
        (TODAY - timedelta(days=7), "month"),
        (TODAY - timedelta(days=20), "month"),
        (TODAY - timedelta(days=28), "year"),
        (TODAY - timedelta(days=200), "year"),
    ],
)
def test_a_time_range_asks_for_the_smallest_bucket_that_reaches_its_start(
    loopback: LoopbackServer, start: date, bucket: str
) -> None:
    serve(loopback, [])
    gather(loopback, plan(time_range=TimeRange(start=start, end=TODAY)))
    (search,) = loopback.requests_to("/searx/search")
    assert search.query["time_range"] == [bucket]


def test_a_time_range_older_than_a_year_is_not_filtered_by_the_search(
    loopback: LoopbackServer,
) -> None:
    serve(loopback, [])
    old = TimeRange(start=date(2024, 1, 1), end=date(2024, 1, 31))
    gather(loopback, plan(time_range=old))
    (search,) = loopback.requests_to("/searx/search")
    assert "time_range" not in search.query


def test_buckets_grow_with_the_look_back_and_a_future_range_is_one_day() -> None:
    buckets = [time_range_bucket(TODAY - timedelta(days=n), TODAY) for n in range(0, 400)]
    order = ["day", "week", "month", "year", None]
    assert [order.index(item) for item in buckets] == sorted(order.index(b) for b in buckets)
    assert time_range_bucket(TODAY + timedelta(days=1), TODAY) == "day"


def test_a_news_plan_searches_the_news_category(loopback: LoopbackServer) -> None:
    serve(loopback, [])
    gather(loopback, plan(query_kind="news"))
    (search,) = loopback.requests_to("/searx/search")
    assert search.query["categories"] == ["news"]


# -- results → page bodies ----------------------------------------------------------------------


def test_hits_become_page_body_evidence_from_the_fetched_page(loopback: LoopbackServer) -> None:
    url = port_page(loopback)
    serve(loopback, [hit(url, "湛江港", "搜索摘要：吞吐量", "2026-11-29")])
    outcome = gather(loopback, plan(location="湛江"))
    assert outcome.status == "ok"
    assert outcome.results == 1
    assert outcome.pages_fetched == 1
    assert {item.basis for item in outcome.evidence} == {"page_body"}
    assert PORT_TEXT in outcome.evidence[0].snippet
    assert outcome.evidence[0].url == url
    assert outcome.evidence[0].site == "port-a.test"


def test_a_result_on_the_search_engines_own_origin_goes_through_the_policy(
    loopback: LoopbackServer,
) -> None:
    # The instance runs on 127.0.0.1 and is trusted for its API calls without any
    # allowed_networks; a result URL pointing back at that origin is a URL from outside.
    loopback.route("/searx/admin", Reply(body=article("内部", [PORT_TEXT])))
    inside = loopback.url("/searx/admin")
    serve(loopback, [hit(inside, "湛江港 内部", "湛江港吞吐量")])
    outcome = gather(loopback, plan(), settings=NetworkSettings(timeout_s=5.0))
    assert loopback.requests_to("/searx/search")  # the API call itself was trusted
    assert loopback.requests_to("/searx/admin") == []
    assert outcome.evidence == ()
    assert outcome.status == "empty"
    assert outcome.pages_failed == 1


def test_hits_of_several_queries_are_interleaved_before_the_page_cap(
    loopback: LoopbackServer,
) -> None:
    first, second = port_page(loopback, "port-a.test"), port_page(loopback, "port-b.test")
    results = {
        QUESTION: [hit(first + "?n=1", "a", "x"), hit(first + "?n=2", "a", "x")],
        f"{QUESTION} 湛江": [hit(second, "b", "x")],
    }

    def answer(request: RecordedRequest) -> Reply:
        query = request.query["q"][0]
        return json_reply(searx_body(query, results[query]))

    loopback.route("/searx/search", answer)
    two_queries = plan(location="湛江").model_copy(
        update={"search_queries": (QUESTION, f"{QUESTION} 湛江")}
    )
    outcome = gather(loopback, two_queries, settings=network(max_pages=2))
    fetched = {r.host for r in loopback.requests if r.path == "/news"}
    assert fetched == {"port-a.test", "port-b.test"}
    assert outcome.results == 3


def test_a_snippet_stands_in_only_for_a_query_whose_hits_gave_no_page_body(
    loopback: LoopbackServer,
) -> None:
    page = port_page(loopback, "port-a.test")
    nowhere = f"http://port-b.test:{closed_port()}"
    second = f"{QUESTION} 湛江"
    results = {
        QUESTION: [hit(f"{nowhere}/first", "湛江港", PORT_TEXT), hit(page, "湛江港", "x")],
        second: [hit(f"{nowhere}/second", "湛江港吞吐量", PORT_TEXT)],
    }

    def answer(request: RecordedRequest) -> Reply:
        query = request.query["q"][0]
        return json_reply(searx_body(query, results[query]))

    loopback.route("/searx/search", answer)
    two_queries = plan(location="湛江").model_copy(update={"search_queries": (QUESTION, second)})
    outcome = gather(loopback, two_queries)
    assert outcome.detail["page_failures"] == [
        f"{nowhere}/first no_response:connect_failed",
        f"{nowhere}/second no_response:connect_failed",
    ]
    # The first query has a page body, so its silent hit gives nothing; the second has none.
    assert {(item.url, item.basis, item.gathered_for) for item in outcome.evidence} == {
        (page, "page_body", QUESTION),
        (f"{nowhere}/second", "search_snippet", second),
    }


def test_no_results_because_every_engine_was_unresponsive_is_a_transient_failure(
    loopback: LoopbackServer,
) -> None:
    serve(loopback, [], unresponsive_engines=[["google", "CAPTCHA"], ["brave", "timeout"]])
    outcome = gather(loopback, plan())
    assert (outcome.status, outcome.reason, outcome.failure) == (
        "failed",
        "engines_unresponsive",
        "transient",
    )
    assert outcome.detail["unresponsive_engines"] == ["google", "brave"]


def test_no_results_from_engines_that_answered_is_empty(loopback: LoopbackServer) -> None:
    serve(loopback, [])
    outcome = gather(loopback, plan())
    assert (outcome.status, outcome.reason, outcome.failure) == ("empty", "no_results", None)


@pytest.mark.parametrize(
    ("status", "failure"), [(403, "misconfigured"), (400, "misconfigured"), (502, "transient")]
)
def test_a_refused_search_fails_with_the_status_and_its_kind(
    loopback: LoopbackServer, status: int, failure: str
) -> None:
    loopback.route(
        "/searx/search", Reply(status, body="<h1>Refused</h1>", content_type="text/html")
    )
    outcome = gather(loopback, plan())
    assert (outcome.status, outcome.reason) == ("failed", f"upstream_status_{status}")
    assert outcome.failure == failure


# -- readiness ----------------------------------------------------------------------------------


def test_without_a_base_url_the_adapter_is_not_ready() -> None:
    assert probe(None) == Readiness(ready=False, reason="base_url_missing")


def test_probe_is_ready_only_when_a_json_search_is_answered(loopback: LoopbackServer) -> None:
    serve(loopback, [])
    assert probe(loopback.url("/searx")) == Readiness(ready=True)
    loopback.route("/searx/search", Reply(503, body="down", content_type="text/plain"))
    assert probe(loopback.url("/searx")) == Readiness(ready=False, reason="upstream_status_503")


def test_probe_sees_json_output_disabled_although_the_config_answers(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/searx/config", json_reply({"engines": [], "categories": ["general"]}))
    loopback.route("/searx/search", Reply(403, body="<h1>Forbidden</h1>", content_type="text/html"))
    assert probe(loopback.url("/searx")) == Readiness(ready=False, reason="upstream_status_403")


# -- the per-question deadline ------------------------------------------------------------------


def test_a_page_silent_at_the_question_deadline_is_dropped_and_the_read_page_kept(
    loopback: LoopbackServer,
) -> None:
    fast = port_page(loopback, "port-a.test")
    slow = f"http://port-b.test:{loopback.port}/slow"
    loopback.route(
        "/slow", Reply(body=article("湛江港", [PORT_TEXT]), delay_s=30), host="port-b.test"
    )
    serve(loopback, [hit(fast, "湛江港", "吞吐量"), hit(slow, "湛江港吞吐量", PORT_TEXT)])

    async def go() -> tuple[AdapterAttempt, GatherResult]:
        net = network(timeout_s=60.0)  # only the question's deadline can stop the slow page
        http = HttpRuntime(net)
        runtime = AdapterRuntime(
            network=net,
            fetcher=http.fetcher,
            endpoint=http.endpoint,
            store=EvidenceStore(),
            clock=fixed_clock(NOW),
        )
        config = AdapterSettings(kind="searxng", id="searx", base_url=loopback.url("/searx"))
        gateway = Gateway([SearxngAdapter(config, runtime)], deadline_s=2.0)
        try:
            gathered = await gateway.gather(plan(location="湛江"), AuditLog())
        finally:
            await http.aclose()
        return gathered.attempts[0], gathered

    attempt, gathered = asyncio.run(go())
    assert (attempt.status, attempt.pages_fetched, attempt.pages_failed) == ("ok", 1, 1)
    by_url = {item.url: item.basis for item in gathered.gathered}
    # No answer from the slow page, but the query has a page body: no snippet stands in.
    assert by_url == {fast: "page_body"}
