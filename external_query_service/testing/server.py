"""A loopback HTTP server for tests and benchmarks: routes by Host header and path.

Each site name a test uses (``news-a.test``) is mapped to 127.0.0.1 through
``[network] resolve`` (or ``connect_to``), so one server on one port plays many sites while
the network guard stays on. Responses can be delayed, dripped, dropped, or produced by a
function. With ``tls`` (an ``ssl.SSLContext``) the server speaks https; the handshake runs
in the request's thread, so a stalled client never blocks the others.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "ANY_HOST",
    "MAX_REQUEST_BODY",
    "LoopbackServer",
    "RecordedRequest",
    "Reply",
    "json_reply",
]

ANY_HOST = "*"
#: Request bodies read, at most (a longer one is cut: worlds serve small JSON requests).
MAX_REQUEST_BODY = 1024 * 1024


@dataclass(frozen=True)
class RecordedRequest:
    """A request the loopback server received, as the handler saw it."""

    method: str
    host: str  # Host header without port
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    scheme: str = "http"
    raw_query: str = ""  # as sent, percent-encoded (``query`` drops blank values)
    #: The request body (a POST's), at most ``MAX_REQUEST_BODY`` bytes.
    body: bytes = b""


@dataclass
class Reply:
    """What a route answers. ``chunks`` streams instead of ``body`` (optionally dripped)."""

    status: int = 200
    body: bytes | str = b""
    content_type: str | None = "text/html; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # before the status line
    chunks: Iterable[bytes] | None = None
    chunk_delay_s: float = 0.0
    #: Send this Content-Length instead of the real one (None: the real one, or none when
    #: streaming ``chunks``).
    content_length: int | None = None
    #: Close the connection without answering at all (after ``delay_s``).
    drop: bool = False

    def body_bytes(self) -> bytes:
        """The body as bytes (text is encoded as UTF-8)."""
        return self.body.encode("utf-8") if isinstance(self.body, str) else self.body


Handler = Callable[[RecordedRequest], Reply]


def _constant(reply: Reply) -> Handler:
    def handler(_request: RecordedRequest) -> Reply:
        return reply

    return handler


def json_reply(data: Any, status: int = 200, **kwargs: Any) -> Reply:
    """A ``Reply`` whose body is ``data`` as UTF-8 JSON."""
    import json

    return Reply(
        status=status,
        body=json.dumps(data, ensure_ascii=False).encode("utf-8"),
        content_type="application/json",
        **kwargs,
    )


class _QuietServer(ThreadingHTTPServer):
    tls: ssl.SSLContext | None = None
    # socketserver's default backlog of 5 drops the SYNs of a burst of concurrent fetches;
    # the client retransmits a second later, which would show up as fake latency.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that refuse a body (byte caps, blocked hops) reset the connection on
        # purpose; that is the behaviour under test, not a server fault.
        pass

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        try:
            wrapped = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            # A client that rejects our certificate ends here; that is its decision.
            return
        # The wrapper owns the descriptor now; shutdown_request() only sees the husk.
        try:
            super().finish_request(wrapped, client_address)
        finally:
            with contextlib.suppress(OSError):
                wrapped.close()


class LoopbackServer:
    """``with LoopbackServer() as server: server.route("/x", Reply(...))``."""

    def __init__(self, host: str = "127.0.0.1", *, tls: ssl.SSLContext | None = None) -> None:
        self._routes: dict[tuple[str, str], Handler] = {}
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self._httpd = _QuietServer((host, 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._httpd.tls = tls
        self.scheme = "https" if tls is not None else "http"
        self._thread: threading.Thread | None = None
        # Set on stop: delays and drips end at once instead of outliving the server.
        self._stopping = threading.Event()

    # -- routes -------------------------------------------------------------------------
    def route(self, path: str, reply: Reply | Handler, *, host: str = ANY_HOST) -> None:
        """Answer ``path`` (without query) on ``host`` (a site name, or any host)."""
        handler = reply if callable(reply) else _constant(reply)
        with self._lock:
            self._routes[(host.lower(), path)] = handler

    def requests_to(self, path: str, *, host: str | None = None) -> list[RecordedRequest]:
        """The requests received for ``path`` (on ``host``, when given), in order."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.path == path and (host is None or r.host == host.lower())
            ]

    # -- addresses ----------------------------------------------------------------------
    @property
    def address(self) -> str:
        """The address the server listens on."""
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._httpd.server_address[1])

    def url(self, path: str = "/", *, host: str | None = None) -> str:
        """A URL on this server for ``path``, naming ``host`` instead of the address when
        given."""
        return f"{self.scheme}://{host or self.address}:{self.port}{path}"

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> LoopbackServer:
        """Serve in a background thread; returns the server."""
        # A short poll interval keeps stop() fast (the default waits up to 0.5 s).
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and wait for the thread."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------------------
    def _find(self, host: str, path: str) -> Handler | None:
        with self._lock:
            return self._routes.get((host, path)) or self._routes.get((ANY_HOST, path))

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def _serve(self, method: str) -> None:
                parts = urlsplit(self.path)
                host = _host_of(self.headers.get("Host") or "")
                length = self.headers.get("Content-Length", "")
                size = min(int(length), MAX_REQUEST_BODY) if length.isdigit() else 0
                body = self.rfile.read(size) if size else b""
                request = RecordedRequest(
                    method=method,
                    host=host,
                    path=parts.path,
                    query=parse_qs(parts.query),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    scheme=server.scheme,
                    raw_query=parts.query,
                    body=body,
                )
                server._record(request)
                handler = server._find(host, parts.path)
                reply = handler(request) if handler else Reply(404, b"not found", "text/plain")
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._write(reply)

            def _write(self, reply: Reply) -> None:
                if reply.delay_s and server._stopping.wait(reply.delay_s):
                    return
                if reply.drop:
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(reply.status)
                if reply.content_type:
                    self.send_header("Content-Type", reply.content_type)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.chunks is None:
                    body = reply.body_bytes()
                    length = reply.content_length if reply.content_length is not None else len(body)
                    self.send_header("Content-Length", str(length))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if reply.content_length is not None:
                    self.send_header("Content-Length", str(reply.content_length))
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                for chunk in reply.chunks:
                    if reply.chunk_delay_s and server._stopping.wait(reply.chunk_delay_s):
                        return
                    self.wfile.write(chunk)
                    self.wfile.flush()

        return _Handler


def _host_of(header: str) -> str:
    """The Host header without its port (``[::1]:80`` → ``[::1]``), lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0]
