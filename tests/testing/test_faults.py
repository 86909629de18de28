"""Fault injection in a world produces the attempt statuses the docs promise."""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from external_query_service.errors import InputError
from external_query_service.models import ExternalAnswer
from external_query_service.testing import Reply, World, article, hit, json_reply, searx_body
from external_query_service.testing._faults import PRIVATE_REDIRECT, fault_reply
from tests.support.world import NOW

QUESTION = "湛江港今年吞吐量是多少？"
SEARX = "https://searx.example.org"
ADAPTER = {"kind": "searxng", "id": "searx", "base_url": SEARX}
GOOD = "https://port.example.cn/news"
PAGE = article(
    "湛江港吞吐量再创新高",
    ["湛江港集团发布数据显示，今年前十个月湛江港货物吞吐量达到2.6亿吨，同比增长百分之八。"],
    published="2026-11-20",
)


@pytest.fixture
def world() -> Iterator[World]:
    with World(now=NOW) as built:
        yield built


def search_url(question: str = QUESTION) -> str:
    return f"{SEARX}/search?" + str(httpx.QueryParams({"q": question}))


def serve_search(world: World, *urls: str, latency_ms: int = 0) -> None:
    hits = [hit(url, "湛江港", "湛江港货物吞吐量达到2.6亿吨") for url in urls]
    world.route(search_url(), json_reply(searx_body(QUESTION, hits)), latency_ms=latency_ms)


#: The fetch timeout of the tests whose page hangs or trickles: short, so they end soon, but
#: long enough that the search's own HTTPS exchange (under the same timeout) never misses it
#: on a busy host.
FETCH_TIMEOUT_S = 2.0


def ask(world: World, **network: Any) -> ExternalAnswer:
    with world.service(ADAPTER, network=network) as service:
        return service.answer(QUESTION)


def attempt_event(answer: ExternalAnswer) -> dict[str, Any]:
    return dict(answer.audit.named("attempt")[0].detail)


@pytest.mark.usefixtures("https_worlds")
def test_http_500_from_the_search_engine_is_a_failed_attempt(world: World) -> None:
    world.fault(search_url(), "http_500")
    answer = ask(world)
    assert [(a.status, a.reason) for a in answer.attempts] == [("failed", "upstream_status_500")]
    assert answer.reason == "all_providers_failed"


@pytest.mark.usefixtures("https_worlds")
def test_refused_connection_is_a_failed_attempt(world: World) -> None:
    serve_search(world, GOOD)
    world.fault(SEARX, "refused")
    answer = ask(world)
    assert [(a.status, a.reason) for a in answer.attempts] == [("failed", "connect_failed")]
    assert world.requests_to("/search") == []


@pytest.mark.usefixtures("https_worlds")
def test_connection_closed_without_an_answer_is_a_failed_attempt(world: World) -> None:
    world.fault(search_url(), "reset")
    answer = ask(world)
    assert [a.status for a in answer.attempts] == ["failed"]
    assert answer.attempts[0].reason in {"protocol_error", "transport_error"}


@pytest.mark.usefixtures("https_worlds")
def test_latency_beyond_the_question_deadline_is_a_timeout(world: World) -> None:
    world.route(GOOD, Reply(body=PAGE))
    serve_search(world, GOOD, latency_ms=5_000)
    answer = ask(world, deadline_s=0.3, timeout_s=10.0)
    assert [(a.status, a.reason) for a in answer.attempts] == [("timeout", "deadline_exceeded")]


@pytest.mark.usefixtures("https_worlds")
def test_oversized_page_is_no_document_and_gives_nothing_not_even_its_snippet(
    world: World,
) -> None:
    world.fault(GOOD, "oversized")
    serve_search(world, GOOD)
    answer = ask(world, max_page_bytes=200_000)
    event = attempt_event(answer)
    assert event["page_failures"] == [f"{GOOD} not_a_document:content_too_large"]
    assert answer.attempts[0].pages_failed == 1
    assert answer.evidence == ()


@pytest.mark.usefixtures("https_worlds")
def test_redirect_to_a_private_address_is_blocked(world: World) -> None:
    world.fault(GOOD, "redirect_private")
    serve_search(world, GOOD)
    answer = ask(world)
    assert attempt_event(answer)["page_failures"] == [f"{GOOD} not_a_document:blocked_destination"]
    assert answer.evidence == ()  # a blocked page is never a source, not even by snippet
    assert PRIVATE_REDIRECT.startswith("http://169.254.169.254/")


@pytest.mark.usefixtures("https_worlds")
def test_blocked_origin_is_refused_before_any_connection(world: World) -> None:
    world.fault(GOOD, "blocked")
    serve_search(world, GOOD)
    answer = ask(world)
    assert attempt_event(answer)["page_failures"] == [f"{GOOD} not_a_document:blocked_destination"]
    assert world.requests_to("/news") == []


@pytest.mark.usefixtures("https_worlds")
def test_slow_body_is_cut_off_by_the_fetch_deadline_and_gives_nothing(world: World) -> None:
    world.fault(GOOD, "slow_body")
    serve_search(world, GOOD)
    answer = ask(world, timeout_s=FETCH_TIMEOUT_S)
    assert attempt_event(answer)["page_failures"] == [f"{GOOD} cut_off"]
    assert answer.evidence == ()  # its answer began: not even its snippet stands in
    assert answer.attempts[0].status == "empty"  # the search answered; its page did not


@pytest.mark.usefixtures("https_worlds")
def test_hanging_page_gives_no_response_and_its_snippet_stands_in(world: World) -> None:
    world.fault(GOOD, "hang")
    serve_search(world, GOOD)
    answer = ask(world, timeout_s=FETCH_TIMEOUT_S)
    assert attempt_event(answer)["page_failures"] == [f"{GOOD} no_response:deadline_exceeded"]
    assert len(world.requests_to("/news")) == 1  # asked once, never answered
    assert [(item.url, item.basis) for item in answer.evidence] == [(GOOD, "search_snippet")]


@pytest.mark.usefixtures("https_worlds")
def test_world_file_faults_apply_per_route(tmp_path: Any) -> None:
    from external_query_service.testing import open_world

    (tmp_path / "world.toml").write_text(
        f"""
[world]
now = "2026-11-30T10:00:00+08:00"

[[adapters]]
kind = "searxng"
id = "searx"
base_url = "{SEARX}"

[[search]]
query = "{QUESTION}"
results = [{{ url = "{GOOD}", title = "湛江港", content = "湛江港货物吞吐量达到2.6亿吨" }}]

[[pages]]
url = "{GOOD}"
fault = "redirect_private"
""",
        encoding="utf-8",
    )
    with open_world(tmp_path) as loaded, loaded.service() as service:
        answer = service.answer(QUESTION)
    event = dict(answer.audit.named("attempt")[0].detail)
    assert event["page_failures"] == [f"{GOOD} not_a_document:blocked_destination"]


def test_the_gzip_bomb_is_a_valid_gzip_stream_so_only_the_byte_cap_stops_it() -> None:
    reply = fault_reply("gzip_bomb")
    assert reply.chunks is not None
    raw = b"".join(reply.chunks)
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    total = 0
    for start in range(0, len(raw), 4096):
        piece = decoder.decompress(raw[start : start + 4096])
        assert piece.count(0) == len(piece)
        total += len(piece)
    assert decoder.eof  # the trailer's CRC and length check out
    assert total >= 300 * len(raw)
    assert dict(reply.headers) == {"Content-Encoding": "gzip"}


def test_the_redirect_loop_points_back_at_the_page_asked_for(world: World) -> None:
    world.fault("http://loop.example.net/news?id=7", "redirect_loop")
    with httpx.Client(trust_env=False) as client:
        response = client.get(
            f"http://127.0.0.1:{world.server.port}/news?id=7", headers={"Host": "loop.example.net"}
        )
    assert (response.status_code, response.headers["location"]) == (302, "/news?id=7")


@pytest.mark.usefixtures("https_worlds")
def test_a_drip_sends_the_start_of_a_page_at_its_rate_and_is_cut_off(world: World) -> None:
    reply = fault_reply("drip", drip_bytes_per_s=4)
    assert reply.chunk_delay_s == 0.25
    assert reply.chunks is not None
    assert b"".join(itertools.islice(reply.chunks, 15)) == b"<html><body><p>"
    assert fault_reply("drip").chunk_delay_s == 1.0  # one byte a second unless told
    drip = world.fault("http://drip.example.net/news", "drip", drip_bytes_per_s=50)
    world.route(GOOD, Reply(body=PAGE))
    serve_search(world, GOOD, drip)
    # The good page read and nothing left to start: the drip (a minute long) is cut off.
    answer = ask(world, max_pages=2)
    assert attempt_event(answer)["page_failures"] == [f"{drip} cut_off"]
    assert {item.url for item in answer.evidence} == {GOOD}


def test_a_drip_needs_a_positive_rate(world: World) -> None:
    with pytest.raises(InputError, match="drip_bytes_per_s"):
        world.fault(GOOD, "drip", drip_bytes_per_s=0)


def test_a_failure_rate_fails_that_share_of_a_routes_requests_in_fixed_places(
    world: World,
) -> None:
    url = world.route("http://flaky.example.net/api", json_reply({"ok": True}), failure_rate=0.3)
    with httpx.Client(trust_env=False) as client:
        statuses = [
            client.get(
                f"http://127.0.0.1:{world.server.port}/api", headers={"Host": "flaky.example.net"}
            ).status_code
            for _ in range(20)
        ]
    assert url == "http://flaky.example.net/api"
    failed = [n for n, status in enumerate(statuses, start=1) if status == 500]
    assert failed == [4, 7, 10, 14, 17, 20]
    assert set(statuses) == {200, 500}


def test_a_failure_rate_may_use_another_route_fault_but_not_an_origin_fault(world: World) -> None:
    world.route("http://flaky.example.net/r", Reply(body="ok"), failure_rate=1.0, failure="reset")
    with httpx.Client(trust_env=False) as client, pytest.raises(httpx.RemoteProtocolError):
        client.get(f"http://127.0.0.1:{world.server.port}/r", headers={"Host": "flaky.example.net"})
    with pytest.raises(InputError, match="origin"):
        world.route("http://flaky.example.net/x", Reply(), failure_rate=0.5, failure="refused")
    with pytest.raises(InputError, match="between 0 and 1"):
        world.route("http://flaky.example.net/y", Reply(), failure_rate=1.5)
