"""One service, many questions: shared requests, kept replies, a bounded store, clean close.

Real loopback worlds; the world's request log proves how many calls reached it.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service._evidence_store import EvidenceEvicted
from external_query_service.admission._chain import service_envelope
from external_query_service.models import ExternalAnswer
from external_query_service.testing import Reply, World, article, hit, json_reply, searx_body
from tests.support.http_cache import START as NOW
from tests.support.http_cache import Clock

QUESTION = "2026年珠海航展有哪些新机型亮相？"


def airshow(n: int) -> str:
    return article(
        f"珠海航展新机型 {n}",
        [
            f"珠海航展第{n}篇报道：新型无人运输机与舰载预警机首次公开亮相，"
            "来自四十多个国家和地区的参展商参加。",
            f"第{n}篇报道还介绍了新机型的性能与用途，以及本届航展的飞行表演安排。",
        ],
        published="2026-11-12",
        site_name=f"新闻网{n}",
    )


def airshow_world(
    world: World, pages: int, *, latency_ms: int = 0, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """``pages`` sites answering the question; returns the search adapter's table."""
    results = []
    for n in range(pages):
        reply = Reply(body=airshow(n), headers=headers or {})
        url = world.route(f"http://site-{n}.test/a", reply, latency_ms=latency_ms)
        results.append(hit(url, f"报道 {n}", "航展新机型"))
    search = world.searxng()
    world.route(
        f"{search['base_url']}/search",
        json_reply(searx_body(QUESTION, results)),
        latency_ms=latency_ms,
    )
    return search


def page_requests(world: World, pages: int) -> list[int]:
    return [len(world.requests_to("/a", host=f"site-{n}.test")) for n in range(pages)]


@pytest.mark.parametrize("enabled", [True, False])
def test_twenty_concurrent_identical_questions_make_one_search_call_and_one_fetch_per_page(
    enabled: bool,
) -> None:
    with World() as world:
        search = airshow_world(world, 3, latency_ms=200)
        settings = world.settings(search, cache={"enabled": enabled})

        async def ask() -> list[ExternalAnswer]:
            async with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
                return await asyncio.gather(*(service.aanswer(QUESTION) for _ in range(20)))

        answers = asyncio.run(ask())
        assert {answer.status for answer in answers} == {"answered"}
        assert len({tuple(e.evidence_id for e in answer.evidence) for answer in answers}) == 1
        assert len(world.requests_to("/searx/search")) == 1
        assert page_requests(world, 3) == [1, 1, 1]


def test_a_no_store_page_is_fetched_for_every_question_and_a_plain_one_once() -> None:
    with World() as world:
        search = airshow_world(world, 1)
        world.route(
            "http://fresh.test/b",
            Reply(body=airshow(7), headers={"Cache-Control": "no-store"}),
        )
        results = [
            hit("http://site-0.test/a", "报道", "航展"),
            hit("http://fresh.test/b", "快讯", "航展"),
        ]
        world.route(f"{search['base_url']}/search", json_reply(searx_body(QUESTION, results)))
        with ExternalQueryService(world.settings(search), clock=fixed_clock(NOW)) as service:
            for _ in range(3):
                assert service.answer(QUESTION).status == "answered"
        assert len(world.requests_to("/searx/search")) == 1
        assert page_requests(world, 1) == [1]
        assert len(world.requests_to("/b", host="fresh.test")) == 3


def test_kept_evidence_keeps_the_accessed_at_and_raw_digest_of_the_real_fetch() -> None:
    clock = Clock()
    with World() as world:
        search = airshow_world(world, 1)
        with ExternalQueryService(world.settings(search), clock=clock) as service:
            first = service.answer(QUESTION)
            clock.now = NOW + timedelta(minutes=2)
            second = service.answer(QUESTION)
        assert page_requests(world, 1) == [1]
    (live,) = [e for e in first.evidence if e.basis == "page_body"]
    (kept,) = [e for e in second.evidence if e.basis == "page_body"]
    assert live.accessed_at == NOW
    assert kept.accessed_at == NOW  # not the second question's "now"
    assert kept.raw_digest == live.raw_digest
    assert kept.content_digest == live.content_digest


def test_a_kept_page_expires_by_the_service_clock() -> None:
    clock = Clock()
    with World() as world:
        search = airshow_world(world, 1, headers={"Cache-Control": "max-age=60"})
        with ExternalQueryService(world.settings(search), clock=clock) as service:
            service.answer(QUESTION)
            clock.now = NOW + timedelta(seconds=59)
            service.answer(QUESTION)
            assert page_requests(world, 1) == [1]
            clock.now = NOW + timedelta(seconds=61)
            third = service.answer(QUESTION)
        assert page_requests(world, 1) == [2]
    (evidence,) = [e for e in third.evidence if e.basis == "page_body"]
    assert evidence.accessed_at == NOW + timedelta(seconds=61)


def test_the_store_stays_under_its_bound_across_many_pages_and_each_answer_reads_back() -> None:
    bound = 6_000  # about four of these pages
    with World() as world:
        search = world.searxng()
        questions = []
        for n in range(12):
            question = f"2026年珠海航展第{n}篇报道说了什么新机型？"
            url = world.route(f"http://site-{n}.test/a", Reply(body=airshow(n)))
            world.results(question, [hit(url, f"报道 {n}", "航展新机型")])
            questions.append(question)
        cache = {"store_max_bytes": bound, "store_hold_s": 0}
        settings = world.settings(search, cache=cache)
        with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
            answers = []
            for question in questions:
                answer = service.answer(question)
                assert answer.status == "answered"
                for evidence in answer.evidence:
                    assert evidence.snippet in service.store.quote(evidence.ref, 0, 10**6)
                assert service.store.size <= bound
                answers.append(answer)
            with pytest.raises(EvidenceEvicted, match="was evicted"):
                service.store.read(answers[0].evidence[0].ref)


def test_close_leaves_no_thread_behind_on_the_sync_path() -> None:
    with World() as world:
        search = airshow_world(world, 3)
        before = set(threading.enumerate())
        service = ExternalQueryService(world.settings(search), clock=fixed_clock(NOW))
        assert service.answer(QUESTION).status == "answered"
        assert len(set(threading.enumerate()) - before) >= 2  # the loop and its workers
        service.close()
        assert set(threading.enumerate()) - before == set()


def test_settings_without_a_cache_section_keep_their_admission_envelope() -> None:
    plain = Settings.from_toml("[network]\nmax_pages = 3\n")
    sized = Settings.from_toml("[network]\nmax_pages = 3\n[cache]\nmax_bytes = 1024\n")
    fresher = Settings.from_toml("[network]\nmax_pages = 3\n[cache]\ndefault_ttl_s = 5\n")
    capped = Settings.from_toml("[network]\nmax_pages = 3\nmax_connections = 2\n")
    assert "cache" not in service_envelope(plain)
    assert service_envelope(sized) == service_envelope(plain)
    assert service_envelope(capped) == service_envelope(plain)
    assert service_envelope(fresher)["cache"] == {"enabled": True, "default_ttl_ms": 5000}


def test_a_search_snippet_from_a_kept_search_reply_keeps_that_replys_time() -> None:
    clock = Clock()
    with World() as world:
        search = world.searxng()
        # No answer at all (a refused connection): only then may the snippet stand in.
        gone = world.fault("http://gone.test/a", "refused")
        snippet = "珠海航展新机型亮相：新型无人运输机与舰载预警机首次公开亮相。"
        world.results(QUESTION, [hit(gone, "珠海航展新机型", snippet)])
        with ExternalQueryService(world.settings(search), clock=clock) as service:
            service.answer(QUESTION)
            clock.now = NOW + timedelta(minutes=3)
            second = service.answer(QUESTION)
        assert len(world.requests_to("/searx/search")) == 1
    (evidence,) = [e for e in second.evidence if e.basis == "search_snippet"]
    assert evidence.accessed_at == NOW
