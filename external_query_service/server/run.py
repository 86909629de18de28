"""Running the app under uvicorn: ``serve`` in the foreground (the CLI: SIGINT and SIGTERM
stop it gracefully) and ``ServerThread`` on a thread (tests, benchmarks, a host's process).

Both listen on a socket bound here first, so a port in use is an ``InputError`` (one line)
and port 0 picks a free port that ``ServerThread.url`` names.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Self

import uvicorn
from fastapi import FastAPI

from ..errors import InputError
from ..service import ExternalQueryService
from ..settings import Settings
from .app import create_app

__all__ = [
    "QUIET_LOGGERS",
    "ServerThread",
    "listen",
    "serve",
]

#: Loggers that would print request lines (a fetched URL, the question in its query) at INFO.
QUIET_LOGGERS = ("httpx", "httpcore")
_START_TIMEOUT_S = 30.0
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (IPv4 or IPv6); an address that cannot be bound (in
    use, not this machine's) is an ``InputError``."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


class _Server(uvicorn.Server):
    """uvicorn's server, except that a stopping signal ends a graceful shutdown there: uvicorn
    raises the signal again afterwards so the process dies by it, where the CLI exits 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread receives signals; a thread is stopped by stop()
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _uvicorn(app: FastAPI, service: ExternalQueryService, *, quiet: bool) -> uvicorn.Server:
    grace = service.settings.server.shutdown_grace_s
    config = uvicorn.Config(
        app,
        lifespan="on",
        ws="none",  # no websocket routes: nothing to import for them
        # uvicorn types it as int; asyncio.wait_for takes the float as it is.
        timeout_graceful_shutdown=grace,  # type: ignore[arg-type]
        server_header=False,
        log_config=None if quiet else uvicorn.config.LOGGING_CONFIG,
        log_level="warning" if quiet else "info",
        access_log=not quiet,
    )
    return _Server(config)


def serve(settings: Settings, *, host: str, port: int) -> None:
    """Serve a service on ``settings`` until SIGINT or SIGTERM; then in-flight questions get
    ``[server] shutdown_grace_s`` to finish, the rest are cancelled, and the service is
    closed. The address is bound before the service is built."""
    sock = listen(host, port)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    service = ExternalQueryService(settings)
    server = _uvicorn(create_app(service), service, quiet=False)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    logging.getLogger("uvicorn.error").info(
        "Serving on http://%s:%d (SIGINT or SIGTERM stops)", shown, bound_port
    )
    server.run(sockets=[sock])


class ServerThread:
    """``with ServerThread(service) as server: httpx.get(server.url + "/healthz")``.

    uvicorn on a thread of its own (its own event loop); ``stop()`` shuts it down as a
    signal would, closes the service (unless ``close_service`` is False) and joins the thread.
    """

    def __init__(
        self,
        service: ExternalQueryService,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        close_service: bool = True,
        quiet: bool = True,
    ) -> None:
        self.service = service
        self.host = host
        self._socket = listen(host, port)
        self.port: int = self._socket.getsockname()[1]
        #: The app served (``app.state.metrics``, ``app.state.sessions``).
        self.app = create_app(service, close_service=close_service)
        self.server = _uvicorn(self.app, service, quiet=quiet)
        self._thread = threading.Thread(
            target=self.server.run,
            kwargs={"sockets": [self._socket]},
            name="external-query-serve",
            daemon=True,
        )

    @property
    def url(self) -> str:
        """The base URL the server listens at."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> Self:
        """Start the server in its thread and wait until it accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._socket.close()
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """Shut down gracefully and wait for the thread (at most ``timeout_s`` seconds)."""
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise RuntimeError("the HTTP server did not stop in time")
        self._socket.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
