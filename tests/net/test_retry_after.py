"""``Retry-After`` read one way (net/_retry_after.py), against a fixed clock: both forms,
the cap, and the model client and the fetcher taking the same reading."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from pydantic import BaseModel

from external_query_service._clock import fixed_clock
from external_query_service.errors import UpstreamStatus
from external_query_service.llm import ChatCompletionsClient, ChatMessage
from external_query_service.net._fetch import SafeFetcher
from external_query_service.net._retry_after import MAX_RETRY_AFTER_S, retry_after
from external_query_service.settings import NetworkSettings
from external_query_service.testing import LoopbackServer, Reply
from tests.support.llm_chat import ChatServer, answer_json, api_error

NOW = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)
CLOCK = fixed_clock(NOW)


class Weather(BaseModel):
    city: str
    temp_c: int | None


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


def test_delay_seconds_are_taken_as_they_are() -> None:
    assert retry_after("120", CLOCK) == 120.0
    assert retry_after(" 0 ", CLOCK) == 0.0


def test_an_http_date_is_a_wait_from_the_injected_clock() -> None:
    assert retry_after(http_date(NOW + timedelta(seconds=90)), CLOCK) == 90.0
    later = fixed_clock(NOW + timedelta(seconds=60))
    assert retry_after(http_date(NOW + timedelta(seconds=90)), later) == 30.0


def test_a_date_already_past_is_no_wait() -> None:
    assert retry_after(http_date(NOW - timedelta(hours=1)), CLOCK) == 0.0


def test_both_forms_are_capped_at_a_day() -> None:
    assert retry_after("999999999", CLOCK) == MAX_RETRY_AFTER_S
    assert retry_after(http_date(NOW + timedelta(days=30)), CLOCK) == MAX_RETRY_AFTER_S


@pytest.mark.parametrize(
    "value",
    [None, "", "soon", "-5", "1.5", "²", "Fri, 31 Dec 1999 23:59:59 -0000", "Mon, 99 Foo 2026"],
)
def test_anything_else_is_no_answer(value: str | None) -> None:
    assert retry_after(value, CLOCK) is None


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def test_the_model_client_waits_what_an_http_date_asks_by_its_clock(chat: ChatServer) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    chat.then(
        Reply(
            503,
            "{}",
            "application/json",
            headers={"Retry-After": http_date(NOW + timedelta(seconds=3))},
        ),
        api_error(503, "overloaded", "api_error"),
        answer_json({"city": "湛江", "temp_c": 24}),
    )
    client = ChatCompletionsClient(chat.settings(max_retries=2), sleep=record, clock=CLOCK)
    messages = (ChatMessage("user", "湛江明天天气？"),)
    asyncio.run(client.complete(messages, Weather, name="weather"))

    assert waits[0] == 3.0  # the date, read against the fixed clock
    assert waits[1] == 1.0  # no Retry-After: the second backoff step


def test_the_fetcher_reports_the_wait_an_http_date_asks_by_its_clock(
    loopback: LoopbackServer,
) -> None:
    loopback.route(
        "/busy",
        Reply(
            503,
            body="busy",
            content_type="text/plain",
            headers={"Retry-After": http_date(NOW + timedelta(seconds=42))},
        ),
    )
    network = NetworkSettings.model_validate(
        {"allowed_networks": ["127.0.0.1/32"], "resolve": {"site.test": "127.0.0.1"}}
    )
    fetcher = SafeFetcher(network, clock=CLOCK)

    async def fetch() -> None:
        try:
            await fetcher.fetch(f"http://site.test:{loopback.port}/busy")
        finally:
            await fetcher.aclose()

    with pytest.raises(UpstreamStatus) as caught:
        asyncio.run(fetch())
    assert (caught.value.status, caught.value.retry_after) == (503, 42.0)
