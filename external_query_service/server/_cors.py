"""CORS: Starlette's ``CORSMiddleware``, except that a refused preflight gets the JSON error
body every other refusal has (400 ``cors_not_allowed``, the message naming what was refused:
origin, method, headers) rather than Starlette's plain text."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp

from ._errors import error_response

__all__ = ["JsonCors"]


class JsonCors(CORSMiddleware):
    """``CORSMiddleware`` whose refused preflights are JSON error bodies; ``count(reason)``
    sees each refusal."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        count: Callable[[str], None],
        allow_origins: Sequence[str],
        allow_methods: Sequence[str],
        allow_headers: Sequence[str],
        expose_headers: Sequence[str],
    ) -> None:
        super().__init__(
            app,
            allow_origins=allow_origins,
            allow_methods=allow_methods,
            allow_headers=allow_headers,
            expose_headers=expose_headers,
        )
        self.count = count

    def preflight_response(self, request_headers: Headers) -> Response:
        answer = super().preflight_response(request_headers)
        if answer.status_code != 400:
            return answer
        self.count("cors_not_allowed")
        # Starlette's text names what failed ("Disallowed CORS origin, method").
        failed = bytes(answer.body).decode("utf-8").removeprefix("Disallowed CORS ")
        refusal = error_response(
            400, "cors_not_allowed", f"this CORS preflight is not allowed: {failed}"
        )
        for name, value in answer.headers.items():
            if name.lower() not in {"content-length", "content-type"}:
                refusal.headers[name] = value
        return refusal
