"""Analysis stragglers never hold an answer: pages whose markup is over the analysis budget
are cut off (``cut_off:analysis``) once another page was read, and analysed when no other
page gives anything. Asserted on the outcome and the audit; the timing comparison is
``bench/analysis_cut_off.py``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from external_query_service.adapters._page_walk import ANALYSIS_MARKUP_BUDGET, markup_units
from external_query_service.models import ExternalAnswer
from external_query_service.testing import Reply, World, article, hit, json_reply, searx_body
from external_query_service.testing.content import markup_bombs
from tests.support.page_walk import ADAPTER, NOW, QUESTION, SEARX, SNIPPET, page_failures

#: Room for the bombs' bodies, and a deadline that a loaded host cannot reach: the outcome
#: must not depend on how fast anything ran.
NETWORK = {"max_pages": 5, "max_page_bytes": 4_000_000, "timeout_s": 30.0, "deadline_s": 60.0}
ANSWER = "湛江港集团发布数据显示，今年前十个月湛江港货物吞吐量达到2.6亿吨，同比增长百分之八。"


BOMBS = markup_bombs()


@pytest.fixture
def world(https_worlds: None) -> Iterator[World]:
    with World(now=NOW) as built:
        yield built


def serve(world: World, pages: dict[str, str | Reply]) -> list[str]:
    """``pages`` (name → HTML or reply) served in this order as the search results; their
    URLs."""
    urls = [
        world.route(
            f"https://{name}.example.cn/port",
            body if isinstance(body, Reply) else Reply(body=body),
        )
        for name, body in pages.items()
    ]
    hits = [hit(url, "湛江港吞吐量", SNIPPET, "2026-11-20") for url in urls]
    search = f"{SEARX}/search?" + str(httpx.QueryParams({"q": QUESTION}))
    world.route(search, json_reply(searx_body(QUESTION, hits)))
    return urls


def ask(world: World) -> tuple[ExternalAnswer, int]:
    """The answer with one analysis worker, and how many pages were analysed."""
    with world.service(ADAPTER, network=NETWORK, analysis={"processes": 1}) as service:
        answer = service.answer(QUESTION)
        return answer, service.analysis.in_workers + service.analysis.in_thread


def test_every_bomb_is_over_the_budget() -> None:
    for body in BOMBS.values():
        assert markup_units(body.encode(), "text/html") > ANALYSIS_MARKUP_BUDGET


def test_four_cpu_bombs_ahead_of_a_good_page_are_cut_off_and_the_good_page_answers(
    world: World,
) -> None:
    good = article("湛江港吞吐量再创新高", [ANSWER], published="2026-11-20")
    pages: dict[str, str | Reply] = {**BOMBS, "good": good}
    *bombs, good_url = serve(world, pages)

    answer, analysed = ask(world)

    assert answer.status == "answered"
    assert {item.url for item in answer.evidence} == {good_url}
    assert page_failures(answer) == [f"{url} cut_off:analysis" for url in bombs]
    assert answer.attempts[0].pages_fetched == 1
    assert analysed == 1  # the bombs never reached the worker


def test_a_heavy_page_is_analysed_when_no_other_page_gives_anything(world: World) -> None:
    # The article, with 20,000 empty icon elements after it: heavy, yet the only answer.
    icons = '<div class="icons">' + '<i class="i"></i>' * 20_000 + "</div>"
    heavy = article("湛江港吞吐量再创新高", [ANSWER], published="2026-11-20").replace(
        "</body>", f"{icons}</body>", 1
    )
    assert markup_units(heavy.encode(), "text/html") > ANALYSIS_MARKUP_BUDGET
    missing, heavy_url = serve(world, {"gone": Reply(status=404, body="gone"), "heavy": heavy})

    answer, analysed = ask(world)

    assert page_failures(answer) == [f"{missing} error_status:404"]
    assert {item.url for item in answer.evidence} == {heavy_url}
    assert answer.status == "answered"
    assert analysed == 1
