"""Every failure as ``{"error": {"reason": ..., "message": ...}}``: bad input is a 4xx with
a stable reason, never a 5xx; only a fault of the service itself is a 500.

- body not JSON (or not UTF-8): 400 ``malformed_json``
- a body still arriving after ``[server] body_timeout_s``: 408 ``body_timeout``
- unknown route, session or evidence ref: 404 ``not_found``, ``unknown_session``,
  ``unknown_ref``
- a method the route does not take: 405 ``method_not_allowed``
- a body over ``[server] max_request_bytes``: 413 ``request_too_large``
- body fields of the wrong shape: 422 ``invalid_question``, ``invalid_semantics``,
  ``invalid_request``; the message names every field at fault, unknown ones included
  (``question: Field required; q: unknown field``)
- query or path parameters out of range: 422 ``invalid_parameter``
- the service's ``InvalidQuery``: 422 with its reason (``question_too_long`` ...)
- every question slot stayed busy for ``[network] queue_timeout_s``: 503 ``overloaded``
  with ``Retry-After``
- the service is shutting down: 503 ``shutting_down``
- over ``[server] request_deadline_s``: 504 ``deadline_exceeded``
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ..errors import ApiError, InputError, InvalidQuery, ServiceClosed

__all__ = ["error_response", "install_error_handlers"]

#: Reasons for the HTTP errors raised as the framework's ``HTTPException``: by the framework
#: on its own, and by the body limit (while the framework reads a body it lets only an
#: ``HTTPException`` through to the handlers; any other error there becomes a bare 400).
_STATUS_REASONS = {
    400: "malformed_json",
    404: "not_found",
    405: "method_not_allowed",
    408: "body_timeout",
    413: "request_too_large",
}


def error_response(status_code: int, reason: str, message: str) -> JSONResponse:
    """The JSON error answer every failure gets: ``{"error": {"reason", "message"}}``."""
    return JSONResponse({"error": {"reason": reason, "message": message}}, status_code=status_code)


def _validation(errors: Sequence[Any]) -> tuple[int, str, str]:
    """Status, reason and one line for a request that failed validation."""
    if any(error.get("type") == "json_invalid" for error in errors):
        return 400, "malformed_json", "the request body is not valid JSON"
    first = errors[0]
    location = [str(part) for part in first.get("loc", ())]
    where, field = [*location, "", ""][:2]
    if where == "body":
        reason = {"question": "invalid_question", "semantics": "invalid_semantics"}.get(
            field, "invalid_request"
        )
    else:
        reason = "invalid_parameter"
    named = [_named(error) for error in errors[:_NAMED]]
    more = f" (and {len(errors) - _NAMED} more)" if len(errors) > _NAMED else ""
    return 422, reason, "; ".join(named) + more


#: The most faults one message names.
_NAMED = 5


def _named(error: Any) -> str:
    """One fault: where, and what is wrong there."""
    location = [str(part) for part in error.get("loc", ())]
    shown = ".".join(location[1:]) or (location[0] if location else "") or "(request)"
    if error.get("type") == "extra_forbidden":
        return f"{shown}: unknown field"
    return f"{shown}: {error.get('msg', 'invalid')}"


def install_error_handlers(app: FastAPI, count: Callable[[str], None]) -> None:
    """Answer every failure in the one error shape; ``count(reason)`` sees each."""

    def answer(status_code: int, reason: str, message: str) -> JSONResponse:
        count(reason)
        return error_response(status_code, reason, message)

    async def on_validation(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return answer(*_validation(exc.errors()))

    async def on_http(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        reason = _STATUS_REASONS.get(exc.status_code, f"http_{exc.status_code}")
        message = str(exc.detail) if exc.detail else reason
        if reason == "malformed_json":
            message = "the request body is not valid JSON"  # the framework's words are vaguer
        refusal = answer(exc.status_code, reason, message)
        refusal.headers.update(exc.headers or {})
        return refusal

    async def on_api(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        refusal = answer(exc.status_code, exc.reason, exc.detail or exc.reason)
        refusal.headers.update(exc.headers or {})
        return refusal

    async def on_invalid_query(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, InvalidQuery)
        return answer(422, exc.reason, str(exc))

    async def on_input(_request: Request, exc: Exception) -> JSONResponse:
        return answer(422, "invalid_input", str(exc))

    async def on_closed(_request: Request, _exc: Exception) -> JSONResponse:
        return answer(503, "shutting_down", "the service is shutting down; try again later")

    async def on_fault(_request: Request, exc: Exception) -> JSONResponse:
        # Never the exception's text: it may hold a fetched URL or a path.
        return answer(500, "internal_error", f"internal error ({type(exc).__name__})")

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(ApiError, on_api)
    app.add_exception_handler(InvalidQuery, on_invalid_query)
    app.add_exception_handler(InputError, on_input)
    app.add_exception_handler(ServiceClosed, on_closed)
    app.add_exception_handler(Exception, on_fault)
