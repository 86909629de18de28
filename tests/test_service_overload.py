"""Many callers, one service: at most ``max_concurrent_questions`` at once, the rest wait up
to ``queue_timeout_s`` and then end as a real ``overloaded`` answer, never a hang."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from external_query_service import ExternalQueryService, Settings, SettingsError
from external_query_service.execution._concurrency import QuestionGate
from external_query_service.models import QuerySemantics
from external_query_service.testing import World
from tests.support.air_show import QUESTION, slow_world_settings


@pytest.fixture
def world() -> Iterator[World]:
    with World() as opened:
        yield opened


async def _two_at_once(service: ExternalQueryService) -> tuple[Any, Any, float]:
    """Two questions, the second started once the first holds the slot; the second's time."""
    first = asyncio.create_task(service.aanswer(QUESTION))
    while service.questions.active == 0:
        await asyncio.sleep(0.005)
    started = time.monotonic()
    second = await service.aanswer(QUESTION)
    took = time.monotonic() - started
    return await first, second, took


def test_a_question_that_finds_no_slot_in_time_ends_overloaded_quickly(world: World) -> None:
    settings = slow_world_settings(world, 1500, max_concurrent_questions=1, queue_timeout_s=0.2)
    with ExternalQueryService(settings) as service:
        first, second, took = asyncio.run(_two_at_once(service))
    assert first.reason != "overloaded"
    assert (second.status, second.reason, second.retryable) == (
        "insufficient_evidence",
        "overloaded",
        True,
    )
    assert 0.2 <= took < 1.0  # the wait in line, not the slow search
    assert "busy" in second.text
    # Nothing was gathered for it: one search reached the world, the first question's.
    assert len(world.requests_to("/searx/search")) == 1
    assert (second.attempts, second.evidence, second.sources) == ((), (), ())
    # Still a whole answer: the plan, the admission ids, the audit saying why.
    assert second.plan.question == QUESTION
    assert second.admission.request_id.startswith("sha256:")
    assert second.admission.plan_ids == ()
    assert second.admission.persisted is False
    [event] = second.audit.named("overloaded")
    assert event.detail["max_concurrent_questions"] == 1
    assert event.detail["waited_ms"] >= 200
    [planned] = second.audit.named("plan")
    assert planned.detail["fallback_reason"] == "overloaded"


def test_with_no_queue_timeout_a_busy_service_refuses_at_once(world: World) -> None:
    settings = slow_world_settings(world, 1000, max_concurrent_questions=1, queue_timeout_s=0)
    with ExternalQueryService(settings) as service:
        _, second, took = asyncio.run(_two_at_once(service))
    assert second.reason == "overloaded"
    assert took < 0.2


def test_a_waiting_question_gets_the_slot_once_it_frees(world: World) -> None:
    settings = slow_world_settings(world, 400, max_concurrent_questions=1, queue_timeout_s=5)
    with ExternalQueryService(settings) as service:
        first, second, took = asyncio.run(_two_at_once(service))
    assert [first.reason, second.reason].count("overloaded") == 0
    assert took >= 0.3  # it waited for the first one's slow search
    assert len(world.requests_to("/searx/search")) == 2
    assert (service.questions.active, service.questions.waiting) == (0, 0)


def test_an_overloaded_question_never_asks_the_structured_planner(world: World) -> None:
    asked: list[str] = []

    def planner(question: str, _semantics: QuerySemantics | None) -> dict[str, Any]:
        asked.append(question)
        return {"query_kind": "generic_web"}

    settings = slow_world_settings(world, 800, max_concurrent_questions=1, queue_timeout_s=0.05)
    with ExternalQueryService(settings, planner=planner) as service:
        _, second, _ = asyncio.run(_two_at_once(service))
    assert second.reason == "overloaded"
    assert asked == [QUESTION]  # the first question only
    assert second.plan.planner_source == "fallback"


def test_an_overloaded_follow_up_keeps_the_earlier_plan(world: World) -> None:
    settings = slow_world_settings(world, 800, max_concurrent_questions=1, queue_timeout_s=0.05)

    async def scenario(service: ExternalQueryService) -> Any:
        session = service.session()
        await session.aask(QUESTION, {"entities": ["air show"]})
        busy = asyncio.create_task(service.aanswer(QUESTION))
        while service.questions.active == 0:
            await asyncio.sleep(0.005)
        follow = await session.afollow_up("Which of them flew?")
        await busy
        return follow

    with ExternalQueryService(settings) as service:
        follow = asyncio.run(scenario(service))
    assert follow.reason == "overloaded"
    assert follow.plan.planner_source == "follow_up"
    assert follow.plan.entities == ("air show",)


def test_the_gate_is_shared_by_event_loops_on_different_threads() -> None:
    gate = QuestionGate(1)
    inside = threading.Event()
    leave = threading.Event()

    async def hold() -> None:
        async with gate.enter(0) as admitted:
            assert admitted
            inside.set()
            await asyncio.to_thread(leave.wait, 5)

    async def wait_for_slot(timeout_s: float) -> tuple[bool, float]:
        started = time.monotonic()
        async with gate.enter(timeout_s) as admitted:
            return admitted, time.monotonic() - started

    holder = threading.Thread(target=asyncio.run, args=(hold(),))
    holder.start()
    assert inside.wait(5)
    refused, _ = asyncio.run(wait_for_slot(0.05))
    threading.Timer(0.2, leave.set).start()
    admitted, waited = asyncio.run(wait_for_slot(5))
    holder.join(5)
    assert refused is False
    assert admitted is True
    assert 0.15 <= waited < 2  # woken by the release on the other thread's loop
    assert (gate.active, gate.waiting) == (0, 0)


def test_a_cancelled_waiter_leaves_the_line_and_frees_nothing_it_did_not_hold() -> None:
    async def scenario() -> tuple[int, int, bool]:
        gate = QuestionGate(1)
        async with gate.enter(0):
            waiter = asyncio.create_task(gate.enter(5).__aenter__())
            while gate.waiting == 0:
                await asyncio.sleep(0)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert gate.waiting == 0
        async with gate.enter(0) as again:
            return gate.active, gate.waiting, again

    assert asyncio.run(scenario()) == (1, 0, True)


def test_waiters_are_served_first_come_first_served() -> None:
    async def scenario() -> list[int]:
        gate = QuestionGate(1)
        order: list[int] = []

        async def ask(number: int) -> None:
            async with gate.enter(5) as admitted:
                assert admitted
                order.append(number)
                await asyncio.sleep(0.01)

        async with gate.enter(0):
            tasks = []
            for number in range(5):
                tasks.append(asyncio.create_task(ask(number)))
                while gate.waiting <= number:
                    await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == [0, 1, 2, 3, 4]


def test_the_limits_are_settings_with_the_documented_defaults() -> None:
    network = Settings().network
    assert (network.max_concurrent_questions, network.queue_timeout_s) == (64, 10.0)
    loaded = Settings.from_toml("[network]\nmax_concurrent_questions = 2\nqueue_timeout_s = 0\n")
    assert loaded.network.max_concurrent_questions == 2
    with pytest.raises(SettingsError, match="max_concurrent_questions"):
        Settings.from_toml("[network]\nmax_concurrent_questions = 0\n")


def test_a_session_with_a_history_limit_keeps_the_last_plan_only(tmp_path: Any) -> None:
    (tmp_path / "guide.md").write_text(
        "# Guide\n\nThe verifier checks origin, target and time range.\n", encoding="utf-8"
    )
    with ExternalQueryService(Settings().with_docs(tmp_path)) as service:
        session = service.session(history_limit=0)
        session.ask("What does the verifier check?", {"query_kind": "documentation"})
        follow = session.follow_up("And the time range?")
    assert session.history == []
    assert follow.plan.planner_source == "follow_up"
    assert session.last_plan == follow.plan
