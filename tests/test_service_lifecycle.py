"""The service closes what it opened and refuses work afterwards."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from external_query_service import (
    ExternalQueryService,
    InputError,
    InvalidQuery,
    ServiceClosed,
    Settings,
)


def docs_service(tmp_path: Path) -> ExternalQueryService:
    (tmp_path / "guide.md").write_text(
        "# Guide\n\nThe verifier checks origin, target, time range and the number of "
        "independent sources before anything is answered.\n",
        encoding="utf-8",
    )
    return ExternalQueryService(Settings().with_docs(tmp_path))


def portal_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "external-query-portal"]


def test_close_stops_the_private_loop_and_later_calls_are_refused(tmp_path: Path) -> None:
    before = len(portal_threads())
    service = docs_service(tmp_path)
    answer = service.answer("What does the verifier check?", {"query_kind": "documentation"})
    assert answer.status == "answered"
    assert len(portal_threads()) == before + 1
    service.close()
    service.close()  # idempotent
    assert len(portal_threads()) == before
    with pytest.raises(ServiceClosed):
        service.answer("again?")
    with pytest.raises(ServiceClosed):
        service.session().ask("again?")


def test_async_context_manager_closes_and_refuses_afterwards(tmp_path: Path) -> None:
    async def main() -> ExternalQueryService:
        async with docs_service(tmp_path) as service:
            answer = await service.aanswer("What is checked?", {"query_kind": "documentation"})
            assert answer.status == "answered"
        return service

    service = asyncio.run(main())
    with pytest.raises(ServiceClosed):
        asyncio.run(service.aanswer("again?"))


def test_answers_in_two_consecutive_event_loops(tmp_path: Path) -> None:
    service = docs_service(tmp_path)
    try:
        for _ in range(2):
            answer = asyncio.run(
                service.aanswer("What is checked?", {"query_kind": "documentation"})
            )
            assert answer.status == "answered"
    finally:
        service.close()


@pytest.mark.parametrize("question", ["", "   ", "\n"])
def test_an_empty_question_is_an_input_error(tmp_path: Path, question: str) -> None:
    with docs_service(tmp_path) as service, pytest.raises(InputError, match="empty"):
        service.answer(question)


def test_semantics_of_the_wrong_shape_are_input_errors(tmp_path: Path) -> None:
    with docs_service(tmp_path) as service:
        with pytest.raises(InputError, match="query_semantics: mood: unknown key"):
            service.answer("q", {"mood": "happy"})
        with pytest.raises(InputError, match="must be an object"):
            service.answer("q", ["weather"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("question", "semantics", "reason", "message"),
    [
        ("", None, "empty_question", "the question is empty"),
        ("x" * 20_001, None, "question_too_long", "the limit is 20,000"),
        ("bad \ud800 text", None, "invalid_question", "not valid Unicode"),
        (42, None, "invalid_question", "must be text, not int"),
        ("q", {"mood": "happy"}, "invalid_semantics", "mood: unknown key"),
        ("q", {"query_kind": "horoscope"}, "unknown_query_kind", "known kinds: weather,"),
    ],
)
def test_bad_questions_and_semantics_raise_invalid_query_with_a_reason(
    tmp_path: Path, question: object, semantics: object, reason: str, message: str
) -> None:
    with docs_service(tmp_path) as service:
        with pytest.raises(InvalidQuery, match=message) as raised:
            service.answer(question, semantics)  # type: ignore[arg-type]
        assert raised.value.reason == reason
        assert isinstance(raised.value, InputError)
