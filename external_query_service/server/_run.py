"""Running the app under uvicorn: ``serve`` in the foreground (the CLI: SIGINT and SIGTERM
stop it gracefully) and ``ServerThread`` on a thread (tests, benchmarks, a host's process).

Both listen on a socket bound here first, so a port in use is an ``InputError`` (one line)
and port 0 picks a free port that ``ServerThread.url`` names.

``serve(..., workers=N)`` with N > 1 starts N worker processes (uvicorn's supervisor, which
restarts one that dies) that accept on that one socket. Each builds its own service from
the same settings; they share the ledger and the cache, and follow-up sessions live in the
cache, so N > 1 needs ``[cache] url`` (refused otherwise). Metrics: the workers write to a
fresh temporary ``PROMETHEUS_MULTIPROC_DIR`` made before they start and removed on exit,
and ``/metrics`` adds them up.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Self

import uvicorn
from fastapi import FastAPI
from prometheus_client import multiprocess
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess

from ..errors import ExternalQueryError, InputError
from ..service import ExternalQueryService
from ..settings import Settings
from ._access import KeyRing
from ._app import create_app
from ._connections import configure_connections
from ._logs import LogFormat, logging_config
from ._metrics import MULTIPROC_ENV

if TYPE_CHECKING:
    from .._clock import Clock
    from ..adapters._page_walk import RecordedWalks

__all__ = [
    "QUIET_LOGGERS",
    "ServerThread",
    "listen",
    "serve",
    "worker_app",
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


def _config(
    app: object,
    settings: Settings,
    *,
    quiet: bool,
    workers: int = 1,
    log_format: LogFormat = "text",
    log_level: str = "info",
) -> uvicorn.Config:
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        factory=not isinstance(app, FastAPI),
        workers=workers,
        lifespan="on",
        ws="none",  # no websocket routes: nothing to import for them
        # uvicorn types it as int; asyncio.wait_for takes the float as it is.
        timeout_graceful_shutdown=settings.server.shutdown_grace_s,  # type: ignore[arg-type]
        server_header=False,
        log_config=None if quiet else logging_config(log_format, log_level),
        log_level="warning" if quiet else log_level,
        access_log=False,  # the access line is _logs.AccessLog's, with the request id
        limit_concurrency=settings.server.limit_concurrency,
        # uvicorn types it as int; the event loop's call_later takes the float as it is.
        timeout_keep_alive=settings.server.keep_alive_timeout_s,  # type: ignore[arg-type]
    )
    configure_connections(config, header_timeout_s=settings.server.header_timeout_s)
    return config


def _uvicorn(app: FastAPI, service: ExternalQueryService, *, quiet: bool) -> uvicorn.Server:
    return _Server(_config(app, service.settings, quiet=quiet))


def worker_app(settings: Settings) -> FastAPI:
    """The app one worker of ``serve --workers N`` serves (called in the worker process).
    A service that cannot be built ends the worker as a start-up failure, which stops the
    supervisor instead of restarting the worker forever."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        service = ExternalQueryService(settings)
    except ExternalQueryError as exc:
        logging.getLogger("uvicorn.error").error("cannot start a worker: %s", exc)
        sys.exit(STARTUP_FAILURE)
    return create_app(service, owns_process=True)


class _Workers(Multiprocess):
    """uvicorn's supervisor, marking a dead worker's metrics dead before replacing it."""

    def keep_subprocess_alive(self) -> None:
        for worker in self.processes:
            if worker.pid is not None and not worker.process.is_alive():
                multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
        super().keep_subprocess_alive()


def serve(
    settings: Settings,
    *,
    host: str,
    port: int,
    workers: int = 1,
    insecure_no_auth: bool = False,
    clock: Clock | None = None,
    recorded_walks: RecordedWalks | None = None,
    log_format: LogFormat = "text",
    log_level: str = "info",
) -> None:
    """Serve a service on ``settings`` until SIGINT or SIGTERM; then in-flight questions get
    ``[server] shutdown_grace_s`` to finish, the rest are cancelled, and the service is
    closed. The address is bound before the service is built. ``workers`` > 1: that many
    worker processes (see the module docstring); it needs ``[cache] url``. A ``host`` other
    than a loopback address with no API key configured is refused unless
    ``insecure_no_auth``: anyone reaching the port would spend the service's provider keys.
    ``clock`` and ``recorded_walks`` go to the one service (a recorded world's replay); with
    ``workers`` > 1 they are refused. Every log line goes to stderr, in ``log_format``
    (``text`` or ``json``) at ``log_level`` (``server/_logs.py``)."""
    _refuse_unsafe(
        settings,
        host,
        workers,
        insecure_no_auth,
        replayed=clock is not None or recorded_walks is not None,
    )
    sock = listen(host, port)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    service = ExternalQueryService(settings, clock=clock, recorded_walks=recorded_walks)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    log = logging.getLogger("uvicorn.error")
    if workers == 1:
        app = create_app(service, owns_process=True)
        server = _Server(
            _config(app, settings, quiet=False, log_format=log_format, log_level=log_level)
        )
        log.info("Serving on http://%s:%d (SIGINT or SIGTERM stops)", shown, bound_port)
        server.run(sockets=[sock])
        return
    # Built once here only to fail fast, with one line, on what every worker would meet.
    service.close()
    _serve_workers(
        settings,
        sock,
        f"{shown}:{bound_port}",
        workers=workers,
        log_format=log_format,
        log_level=log_level,
    )


def _refuse_unsafe(
    settings: Settings, host: str, workers: int, insecure_no_auth: bool, *, replayed: bool
) -> None:
    """An ``InputError`` for what ``serve`` refuses (see its docstring) before it binds."""
    if (
        not insecure_no_auth
        and not _loopback(host)
        and not KeyRing.from_settings(settings.server).configured
    ):
        raise InputError(
            f"refusing to serve on {host} with no API key configured: set [server] "
            "api_keys_env or api_key_hashes, or pass --insecure-no-auth"
        )
    if workers < 1:
        raise InputError(f"--workers must be at least 1, not {workers}")
    if workers > 1 and replayed:
        raise InputError("a replayed world is served from one process, not --workers")
    if workers > 1 and settings.cache.url is None:
        raise InputError(
            "--workers above 1 needs [cache] url (Redis): follow-up sessions must reach "
            "every worker"
        )


def _serve_workers(
    settings: Settings,
    sock: socket.socket,
    address: str,
    *,
    workers: int,
    log_format: LogFormat,
    log_level: str,
) -> None:
    """Serve ``sock`` (shown as ``address``) from ``workers`` processes, each building its
    own service (``worker_app``), their metrics added up in a temporary folder removed
    afterwards."""
    log = logging.getLogger("uvicorn.error")
    config = _config(
        functools.partial(worker_app, settings),
        settings,
        quiet=False,
        workers=workers,
        log_format=log_format,
        log_level=log_level,
    )
    with tempfile.TemporaryDirectory(prefix="external-query-metrics-") as folder:
        previous = os.environ.get(MULTIPROC_ENV)
        os.environ[MULTIPROC_ENV] = folder  # the workers inherit it before they import
        try:
            config.configure_logging()
            log.info(
                "Serving on http://%s with %d workers (SIGINT or SIGTERM stops)",
                address,
                workers,
            )
            _Workers(config, sockets=[sock]).run()
        finally:
            if previous is None:
                os.environ.pop(MULTIPROC_ENV, None)
            else:
                os.environ[MULTIPROC_ENV] = previous
            sock.close()


def _loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
