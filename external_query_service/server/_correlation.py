"""Tying a caller's request to the answer it got: ``X-Request-ID``, ``traceparent``, and
one JSON log line per answer.

``X-Request-ID`` is taken when it is printable ASCII of at most 128 characters (anything
else is 400 ``invalid_request_id``) or made up (32 hex digits), and echoed on every
response, refusals included. The question's audit names it (the ``question`` event's
``request_id``), and so does the answer's log line. A valid W3C ``traceparent`` makes the
answer's spans children of the caller's (``tracing.continue_trace``), and its trace id is
in the audit and the log line as ``trace_id`` with or without OpenTelemetry installed.

The log line (logger ``external_query_service.server.answers``, level INFO) holds
``request_id``, ``trace_id``, ``route``, ``status``, ``reason``, ``adapters`` (each tried
adapter's status), ``pages`` (pages read), ``latency_ms``, and the question only when
``[server] log_questions`` is true: a question may be personal, so it stays out by default.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from contextvars import ContextVar
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._audit import on_behalf_of
from ..models import ExternalAnswer
from ..observability._tracing import continue_trace, trace_id_of
from ._errors import error_response

__all__ = ["ANSWER_LOG", "MAX_REQUEST_ID_CHARS", "RequestIds", "log_answer", "request_id"]

MAX_REQUEST_ID_CHARS = 128
#: The logger of the one line per answer.
ANSWER_LOG = logging.getLogger("external_query_service.server.answers")
_VALID = re.compile(rf"[\x20-\x7e]{{1,{MAX_REQUEST_ID_CHARS}}}")
_request: ContextVar[dict[str, str] | None] = ContextVar("served_request", default=None)


def request_id() -> dict[str, str]:
    """``request_id`` and (when the caller sent one) ``trace_id`` of the request served in
    this context."""
    return dict(_request.get() or {})


class RequestIds:
    """ASGI middleware: every response carries ``X-Request-ID``; what runs inside sees the
    ids through ``request_id()`` and the audit (``on_behalf_of``), and continues the
    caller's trace."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        given = headers.get(b"x-request-id")
        text = given.decode("latin-1") if given is not None else None
        valid = text is not None and _VALID.fullmatch(text) is not None
        chosen = text if valid and text is not None else secrets.token_hex(16)

        async def echo(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["X-Request-ID"] = chosen
            await send(message)

        if text is not None and not valid:
            refusal = error_response(
                400,
                "invalid_request_id",
                f"X-Request-ID must be printable ASCII, 1 to {MAX_REQUEST_ID_CHARS} characters",
            )
            await refusal(scope, receive, echo)
            return
        traceparent = headers.get(b"traceparent", b"").decode("latin-1") or None
        ids = {"request_id": chosen}
        trace_id = trace_id_of(traceparent)
        if trace_id is not None:
            ids["trace_id"] = trace_id
        token = _request.set(ids)
        try:
            with on_behalf_of(**ids), continue_trace(traceparent):
                await self.app(scope, receive, echo)
        finally:
            _request.reset(token)


def log_answer(found: ExternalAnswer, *, route: str, seconds: float, question: str | None) -> None:
    """The answer's one JSON log line (``question`` None leaves it out)."""
    if not ANSWER_LOG.isEnabledFor(logging.INFO):
        return
    line: dict[str, Any] = {
        **request_id(),
        "route": route,
        "status": found.status,
        "reason": found.reason,
        "adapters": {item.adapter_id: item.status for item in found.attempts},
        "pages": sum(item.pages_fetched for item in found.attempts),
        "latency_ms": round(seconds * 1000),
    }
    if question is not None:
        line["question"] = question
    # The fields too, so a JSON log format writes them as the line's own (server/_logs.py).
    ANSWER_LOG.info(json.dumps(line, ensure_ascii=False, sort_keys=True), extra={"fields": line})
