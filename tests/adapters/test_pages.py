"""The search page walk end to end: results that misbehave cannot hide the good ones, and
only a result that gave no answer at all may stand in by its search snippet."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from external_query_service.adapters._pages import (
    STRAGGLER_FLOOR_S,
    STRAGGLER_GRACE_S,
    straggler_patience,
)
from external_query_service.models import ExternalAnswer
from external_query_service.testing import Reply, World, article, hit, json_reply, searx_body
from external_query_service.testing._faults import Fault
from tests.support.page_walk import ADAPTER, NOW, QUESTION, SEARX, SNIPPET, page_failures

#: The verifier's note for evidence that is only a search snippet, as a Chinese answer says it.
SNIPPET_NOTE = "仅依据搜索摘要"
#: A small byte cap keeps the oversized pages cheap; a test that needs a fetch cut short
#: sets its own timeout_s (or deadline_s), so every test here stays within a few seconds.
FAST = {"max_page_bytes": 200_000, "timeout_s": 5.0, "deadline_s": 5.0}


@pytest.fixture
def world(https_worlds: None) -> Iterator[World]:
    with World(now=NOW) as built:
        yield built


def good_page(world: World, n: int) -> str:
    body = article(
        f"湛江港吞吐量再创新高（{n}）",
        [
            f"湛江港集团第{n}次发布数据显示，今年前十个月湛江港货物吞吐量达到2.6亿吨，同比增长百分之八。"
        ],
        published="2026-11-20",
    )
    return world.route(f"https://good-{n}.example.cn/port", Reply(body=body))


def bad_page(world: World, name: str, fault: Fault, **options: Any) -> str:
    return world.fault(f"https://{name}.example.net/port", fault, **options)


def serve_search(world: World, urls: list[str]) -> None:
    hits = [hit(url, "湛江港吞吐量", SNIPPET, "2026-11-20") for url in urls]
    search = f"{SEARX}/search?" + str(httpx.QueryParams({"q": QUESTION}))
    world.route(search, json_reply(searx_body(QUESTION, hits)))


def ask(world: World, **network: Any) -> ExternalAnswer:
    with world.service(ADAPTER, network={**FAST, **network}) as service:
        return service.answer(QUESTION)


def admitted_bases(answer: ExternalAnswer) -> dict[str, str]:
    """URL → basis of every piece of evidence the verifier admitted."""
    ids = {decision.evidence_id for decision in answer.verifier.accepted}
    return {item.url: item.basis for item in answer.evidence if item.evidence_id in ids}


def page_requests(world: World) -> list[str]:
    """Every page request, as ``host/path``, in arrival order (the search engine left out)."""
    return [f"{r.host}{r.path}" for r in world.requests if r.path == "/port"]


def test_five_hostile_results_first_cannot_hide_the_five_good_pages_behind_them(
    world: World,
) -> None:
    bad = [
        bad_page(world, "binary", "binary"),
        bad_page(world, "bomb", "gzip_bomb"),
        bad_page(world, "huge", "oversized"),
        bad_page(world, "drip", "slow_body"),
        bad_page(world, "loop", "redirect_loop"),
    ]
    good = [good_page(world, n) for n in range(1, 6)]
    serve_search(world, bad + good)

    answer = ask(world, max_pages=5, timeout_s=1.0)

    assert answer.status == "answered"
    assert {item.basis for item in answer.evidence} == {"page_body"}
    assert {item.url for item in answer.evidence} == set(good)
    assert admitted_bases(answer)
    assert set(admitted_bases(answer)) <= set(good)
    assert page_failures(answer) == [
        f"{bad[0]} not_a_document:unsupported_content",
        f"{bad[1]} not_a_document:content_too_large",
        f"{bad[2]} not_a_document:content_too_large",
        f"{bad[3]} cut_off",
        f"{bad[4]} not_a_document:too_many_redirects",
    ]
    attempt = answer.attempts[0]
    assert (attempt.status, attempt.pages_fetched, attempt.pages_failed) == ("ok", 5, 5)
    assert SNIPPET_NOTE not in answer.text
    for url in good:
        assert page_requests(world).count(url.split("//")[1]) == 1


def test_a_result_without_any_answer_stands_in_by_its_snippet_when_no_page_has_a_body(
    world: World,
) -> None:
    silent = "https://silent.example.net/port"
    world.fault(silent, "refused")
    missing = world.route("https://gone.example.net/port", Reply(status=404, body="gone"))
    binary = bad_page(world, "binary", "binary")
    serve_search(world, [silent, missing, binary])

    answer = ask(world)

    assert page_failures(answer) == [
        f"{silent} no_response:connect_failed",
        f"{missing} error_status:404",
        f"{binary} not_a_document:unsupported_content",
    ]
    assert [(item.url, item.basis) for item in answer.evidence] == [(silent, "search_snippet")]
    assert answer.status == "answered"
    assert admitted_bases(answer) == {silent: "search_snippet"}
    assert any(SNIPPET_NOTE in note for note in answer.uncertainties)
    assert SNIPPET_NOTE in answer.text  # the reader is told what the answer rests on


def test_no_snippet_stands_in_once_the_query_has_a_page_body(world: World) -> None:
    silent = "https://silent.example.net/port"
    world.fault(silent, "refused")
    good = good_page(world, 1)
    serve_search(world, [silent, good])

    answer = ask(world)

    assert page_failures(answer) == [f"{silent} no_response:connect_failed"]
    assert {(item.url, item.basis) for item in answer.evidence} == {(good, "page_body")}
    assert SNIPPET_NOTE not in answer.text


def test_the_walk_stops_after_twice_max_pages_attempts(world: World) -> None:
    bad = [bad_page(world, f"binary-{n}", "binary") for n in range(8)]
    good = good_page(world, 1)
    serve_search(world, [*bad, good])

    answer = ask(world, max_pages=2)

    # Four fetches (2 × max_pages), the first four results in list order; the good page
    # ninth in the list is never asked for.
    assert sorted(page_requests(world)) == sorted(f"binary-{n}.example.net/port" for n in range(4))
    assert [line.split()[0] for line in page_failures(answer)] == bad[:4]
    assert answer.evidence == ()
    assert answer.status == "insufficient_evidence"


def test_the_walk_stops_once_max_pages_pages_are_read(world: World) -> None:
    good = [good_page(world, n) for n in range(1, 5)]
    serve_search(world, good)

    answer = ask(world, max_pages=2)

    assert sorted(page_requests(world)) == ["good-1.example.cn/port", "good-2.example.cn/port"]
    assert {item.url for item in answer.evidence} == set(good[:2])
    assert answer.attempts[0].pages_fetched == 2


def test_a_page_cut_off_mid_body_by_the_question_deadline_gives_nothing(world: World) -> None:
    drip = bad_page(world, "drip", "slow_body")
    silent = bad_page(world, "silent", "hang")
    serve_search(world, [drip, silent])

    # Only the question's deadline can stop either page.
    answer = ask(world, timeout_s=30.0, deadline_s=1.0)

    assert page_failures(answer) == [f"{drip} cut_off", f"{silent} no_response:deadline_exceeded"]
    # The drip had begun to answer: nothing. The silent page never did: its snippet stands in.
    assert [(item.url, item.basis) for item in answer.evidence] == [(silent, "search_snippet")]
    assert answer.attempts[0].status == "ok"  # the pages were cut off, not the whole attempt


def test_binary_bytes_labelled_as_html_are_no_document_either(world: World) -> None:
    fake = bad_page(world, "fake", "binary", content_type="text/html; charset=utf-8")
    serve_search(world, [fake])

    answer = ask(world)

    [failure] = page_failures(answer)
    assert failure.startswith(f"{fake} not_a_document:")
    assert answer.evidence == ()


@pytest.mark.parametrize("fault", ["hang", "slow_body"])
def test_a_straggling_page_is_cut_off_once_max_pages_pages_are_read(
    world: World, fault: Fault
) -> None:
    slow = bad_page(world, "slow", fault)
    good = [good_page(world, n) for n in (1, 2)]
    serve_search(world, [slow, *good])

    started = time.monotonic()
    answer = ask(world, max_pages=2, timeout_s=10.0, deadline_s=10.0)
    elapsed = time.monotonic() - started

    # The slow page would hold the answer for 10 s; the straggler grace ends it at once.
    assert elapsed < 2.0
    assert page_failures(answer) == [f"{slow} cut_off"]
    assert {item.url for item in answer.evidence} == set(good)
    assert answer.status == "answered"
    assert answer.attempts[0].pages_fetched == 2


def test_a_straggler_is_cut_off_once_every_other_page_of_the_walk_has_settled(
    world: World,
) -> None:
    good = good_page(world, 1)
    slow = bad_page(world, "slow", "hang")
    serve_search(world, [good, slow])

    started = time.monotonic()
    # max_pages=3 is never reached: the list runs out with one page read and one loading.
    answer = ask(world, max_pages=3, timeout_s=10.0, deadline_s=10.0)
    elapsed = time.monotonic() - started

    assert elapsed < 2.0
    assert page_failures(answer) == [f"{slow} cut_off"]
    assert {(item.url, item.basis) for item in answer.evidence} == {(good, "page_body")}
    assert SNIPPET_NOTE not in answer.text  # a cut-off page's snippet does not stand in


def test_a_dripping_page_loses_its_place_to_the_next_hit_and_ends_when_enough_are_read(
    world: World,
) -> None:
    drip = bad_page(world, "drip", "drip", drip_bytes_per_s=20)
    good = [good_page(world, n) for n in (1, 2)]
    serve_search(world, [drip, *good])

    # One place for the drip and one for the first good page: the second good page can only
    # be read if the drip gave up its place, and the walk ends with max_pages pages read.
    answer = ask(world, max_pages=2, timeout_s=10.0, deadline_s=10.0)

    assert page_failures(answer) == [f"{drip} cut_off"]
    assert {item.url for item in answer.evidence} == set(good)
    assert answer.attempts[0].pages_fetched == 2
    assert answer.status == "answered"


@pytest.mark.parametrize(
    ("slowest", "patience"),
    [(0.0, STRAGGLER_FLOOR_S), (0.004, STRAGGLER_FLOOR_S), (0.15, 0.15), (3.0, STRAGGLER_GRACE_S)],
)
def test_a_page_keeps_its_place_as_long_again_as_the_slowest_read_page_within_bounds(
    slowest: float, patience: float
) -> None:
    # However quick the pages read were, a page gets STRAGGLER_FLOOR_S: a few milliseconds of
    # scheduling on a busy host must not decide which pages a replay reads.
    assert STRAGGLER_FLOOR_S < 0.15 < STRAGGLER_GRACE_S
    assert straggler_patience(slowest) == patience


def test_a_page_whose_body_arrived_finishes_its_analysis_after_the_straggler_grace(
    world: World,
) -> None:
    # Both pages arrive at once; the long one takes far longer than STRAGGLER_GRACE_S to
    # analyse. Only pages still loading are stragglers: it is read, not cut off.
    quick = good_page(world, 1)
    paragraphs = [
        f"湛江港集团第{n}段报告：今年前十个月湛江港货物吞吐量达到2.6亿吨，集装箱航线持续增加，"
        "港口建设投资同比增长百分之十二，码头作业效率进一步提升。"
        for n in range(6000)
    ]
    long_page = world.route(
        "https://long.example.cn/port",
        Reply(body=article("湛江港年度报告", paragraphs, published="2026-11-20")),
    )
    serve_search(world, [quick, long_page])

    started = time.monotonic()
    with world.service(
        ADAPTER,
        network={**FAST, "max_pages": 3, "max_page_bytes": 4_000_000},
        analysis={"processes": 0},
    ) as service:
        answer = service.answer(QUESTION)
    elapsed = time.monotonic() - started

    assert page_failures(answer) == []
    assert answer.attempts[0].pages_fetched == 2
    assert long_page in {item.url for item in answer.evidence}
    assert elapsed > STRAGGLER_GRACE_S  # the long analysis really outlasted the grace
