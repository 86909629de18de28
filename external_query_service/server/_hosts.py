"""The ``Host`` allow-list: a request naming a host the service does not answer for is 400
``host_not_allowed`` before anything else runs.

Without it a web page can reach a loopback service through DNS rebinding: its own name,
re-pointed at 127.0.0.1, makes the browser send same-origin requests there. Such a request
still names the page's host, so checking ``Host`` stops it. ``[server] allowed_hosts``
lists the names (and addresses) accepted, ``"*"`` accepting any; empty, the default, means
the loopback names and the address the connection arrived at.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from ._errors import error_response

__all__ = ["LOOPBACK_HOSTS", "HostAllowList", "host_name"]

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port or IPv6 brackets, lowercase."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    name, _, port = value.rpartition(":")
    return name if name and port.isdigit() else value.rstrip(":")


class HostAllowList:
    """ASGI middleware: only requests whose ``Host`` is allowed reach the app."""

    def __init__(
        self, app: ASGIApp, *, allowed: tuple[str, ...], count: Callable[[str], None]
    ) -> None:
        self.app = app
        self.any = "*" in allowed
        self.allowed = frozenset(host_name(item) for item in allowed if item != "*")
        self.count = count

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.any or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        self.count("host_not_allowed")
        refusal = error_response(
            400, "host_not_allowed", "the Host header names a host this service does not serve"
        )
        await refusal(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        header = dict(scope["headers"]).get(b"host")
        if header is None:
            return False
        name = host_name(header.decode("latin-1"))
        if self.allowed:
            return name in self.allowed
        server = scope.get("server")
        return name in LOOPBACK_HOSTS or (server is not None and name == str(server[0]).lower())
