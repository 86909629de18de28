"""The request body cap: a body over the limit is refused before it is read, and one
that arrives too slowly is refused when its time is up.

A declared ``Content-Length`` over the cap is refused at the first read, without reading;
a chunked body is counted as it arrives and refused the moment it passes the cap. Either
way the route sees the framework's ``HTTPException`` (413), which the error handlers answer
with its reason (the framework, reading a body, lets no other error through). A body not
complete ``timeout_s`` after its first read began is 408 ``body_timeout`` (a client
trickling bytes holds a connection and a task for nothing).
"""

from __future__ import annotations

import asyncio

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit"]


class BodyLimit:
    """ASGI middleware: at most ``max_bytes`` of request body per request, all of it
    within ``timeout_s`` (None: no deadline)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout_s: float | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        received = 0
        complete = False
        deadline: float | None = None

        async def limited() -> Message:
            nonlocal received, complete, deadline
            if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
                raise self._too_large()
            if complete or self.timeout_s is None:  # after the body: the wait for a disconnect
                message = await receive()
            else:
                loop = asyncio.get_running_loop()
                deadline = deadline or loop.time() + self.timeout_s
                try:
                    async with asyncio.timeout_at(deadline):
                        message = await receive()
                except TimeoutError:
                    raise self._too_slow() from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                complete = not message.get("more_body", False)
                if received > self.max_bytes:
                    raise self._too_large()
            return message

        await self.app(scope, limited, send)

    # The status codes name the reasons (body_timeout, request_too_large) in _errors.
    def _too_slow(self) -> HTTPException:
        return HTTPException(408, f"the request body did not arrive within {self.timeout_s:g} s")

    def _too_large(self) -> HTTPException:
        return HTTPException(413, f"the request body is over {self.max_bytes:,} bytes")
