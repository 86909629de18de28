"""The request body cap: a body over the limit is refused before it is read.

A declared ``Content-Length`` over the cap is refused at the first read, without reading;
a chunked body is counted as it arrives and refused the moment it passes the cap. Either
way the route sees an ``ApiError`` (413), which the error handlers answer.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ApiError

__all__ = ["BodyLimit"]


class BodyLimit:
    """ASGI middleware: at most ``max_bytes`` of request body per request."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        received = 0

        async def limited() -> Message:
            nonlocal received
            if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
                raise self._too_large()
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise self._too_large()
            return message

        await self.app(scope, limited, send)

    def _too_large(self) -> ApiError:
        return ApiError(
            413, "request_too_large", f"the request body is over {self.max_bytes:,} bytes"
        )
