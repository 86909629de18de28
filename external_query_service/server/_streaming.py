"""Server-Sent Events for a question in progress.

``POST /v1/answer`` (and the follow-up route) with ``Accept: text/event-stream`` or
``"stream": true`` in the body refuses an invalid request (its body, the question, the
semantics, the session) with its 4xx and the JSON error body before any event. An
acceptable one is answered 200 ``text/event-stream`` at once, then: ``plan``, one
``attempt`` per adapter attempt, ``verified``, and finally ``answer`` (the same JSON the
route answers without streaming) or ``error`` (``{"error": {"reason", "message"}}``: what
went wrong once the question ran, a deadline or a shutdown). Each event's ``data`` is one
line of JSON. The events come from the question's audit as each is recorded
(``audit.listening``), so the first arrives before any page is read. A comment line
(``: heartbeat``) goes out whenever nothing else did for ``[server] stream_heartbeat_s``,
so proxies do not close a quiet stream. A client that disconnects cancels its question:
no page is requested after that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from fastapi import Request
from fastapi.responses import StreamingResponse

from .._audit import AuditEvent, listening
from ..errors import ApiError, InputError, InvalidQuery, ServiceClosed
from ..observability._progress import ProgressEvent, progress_event

__all__ = [
    "ANSWER_EVENTS",
    "EVENT_NAMES",
    "EVENT_STREAM",
    "SSE_EVENT_SCHEMA",
    "Framing",
    "sse",
    "stream_answer",
    "wants_stream",
]

EVENT_STREAM = "text/event-stream"
#: Every event a stream may carry, in the order they come.
EVENT_NAMES = ("plan", "attempt", "verified", "answer", "error")
#: One event, as the OpenAPI document describes it (before OpenAPI 3.2 the media type's
#: schema describes each event of a stream).
SSE_EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": list(EVENT_NAMES)},
        "data": {"type": "string", "description": "One line of JSON."},
    },
    "required": ["event", "data"],
}


def wants_stream(request: Request, asked: bool) -> bool:
    """Whether the caller asked for events: ``"stream": true`` or ``Accept`` naming
    ``text/event-stream``."""
    return asked or EVENT_STREAM in request.headers.get("accept", "").lower()


def sse(name: str, data: object) -> str:
    """One event in the wire format: its name and one line of JSON."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class Framing(Protocol):
    """How a route writes its stream: its opening, each progress event, the answer, or the
    error."""

    def opening(self) -> str:
        """The wire text sent at once, before anything is known ("" for none)."""
        ...

    def progress(self, name: str, data: dict[str, Any]) -> str:
        """The wire text of one progress event (``plan``, ``attempt``, ``verified``)."""
        ...

    def answer(self, body: dict[str, Any]) -> str:
        """The wire text of the answer (the route's JSON body), up to the stream's end."""
        ...

    def error(self, reason: str, message: str) -> str:
        """The wire text of what the route would have answered with a 4xx or 5xx."""
        ...


class _AnswerEvents:
    """``/v1/answer``'s framing: named events, each with one line of JSON."""

    def opening(self) -> str:
        return ""

    def progress(self, name: str, data: dict[str, Any]) -> str:
        return sse(name, data)

    def answer(self, body: dict[str, Any]) -> str:
        return sse("answer", body)

    def error(self, reason: str, message: str) -> str:
        return sse("error", {"error": {"reason": reason, "message": message}})


#: The answer routes' events (see the module docstring).
ANSWER_EVENTS: Framing = _AnswerEvents()


def stream_answer(
    run: Callable[[], Awaitable[dict[str, Any]]],
    *,
    heartbeat_s: float,
    count_error: Callable[[str], None],
    framing: Framing = ANSWER_EVENTS,
) -> StreamingResponse:
    """The events of ``run()`` (which answers with the route's JSON body) as they happen,
    written by ``framing``."""
    return StreamingResponse(
        _events(run, heartbeat_s, count_error, framing),
        media_type=EVENT_STREAM,
        # No proxy may buffer the stream or keep a copy of it.
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _events(
    run: Callable[[], Awaitable[dict[str, Any]]],
    heartbeat_s: float,
    count_error: Callable[[str], None],
    framing: Framing,
) -> AsyncIterator[str]:
    queue: asyncio.Queue[ProgressEvent | None] = asyncio.Queue()  # None: the question ended
    loop = asyncio.get_running_loop()

    def heard(event: AuditEvent) -> None:
        found = progress_event(event)
        if found is not None:
            loop.call_soon_threadsafe(queue.put_nowait, found)

    with listening(heard):  # the task copies this context: its audit tells ``heard``
        question = asyncio.ensure_future(run())
    # Queued after every event the question recorded, so the end comes last.
    question.add_done_callback(lambda _: loop.call_soon_threadsafe(queue.put_nowait, None))
    try:
        opening = framing.opening()
        if opening:
            yield opening
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), heartbeat_s)
            except TimeoutError:
                yield ": heartbeat\n\n"
                continue
            if item is None:
                yield _last(question, count_error, framing)
                return
            yield framing.progress(*item)
    finally:
        # The client went away (or the server stops): nothing more is fetched for it.
        question.cancel()
        question.add_done_callback(_retrieve)


def _last(
    question: asyncio.Future[dict[str, Any]],
    count_error: Callable[[str], None],
    framing: Framing,
) -> str:
    """The answer, or the error the route would have answered."""
    try:
        return framing.answer(question.result())
    except ApiError as exc:
        reason, message = exc.reason, str(exc.detail)
    except InvalidQuery as exc:
        reason, message = exc.reason, str(exc)
    except ServiceClosed:
        reason, message = "shutting_down", "the service is shutting down; try again later"
    except InputError as exc:
        reason, message = "invalid_input", str(exc)
    except Exception as exc:  # a fault of the service: never its text (it may hold a URL)
        reason, message = "internal_error", f"internal error ({type(exc).__name__})"
    count_error(reason)
    return framing.error(reason, message)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Read a cancelled question's outcome, so asyncio does not warn it was never read."""
    with contextlib.suppress(BaseException):
        future.exception()
