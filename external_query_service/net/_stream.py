"""An httpcore network backend on asyncio's own streams.

httpcore's default backend under asyncio goes through anyio: every connect starts a task
group (happy eyeballs over the resolved addresses), and every read and write enters a
cancel scope of its own. ``GuardedBackend`` already resolves and checks the destination and
hands over one IP literal at a time, so none of that is needed here: ``AsyncioBackend``
connects with ``loop.create_connection`` and times each read and write with
``asyncio.timeout``. It is what the guarded client connects through; about a third of the
CPU that the service process spent per fetch went to the anyio layer.

Errors are httpcore's (``ConnectError``, ``ConnectTimeout``, ``ReadError``, ...), as
from the anyio backend, so httpx maps them the same way.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
from httpcore._utils import is_socket_readable

__all__ = ["AsyncioBackend", "AsyncioStream"]

#: The largest read httpcore asks for is 64 KiB; the stream reader may buffer up to this.
_READ_LIMIT = 256 * 1024


@contextmanager
def _mapped(timeout_error: type[Exception], other: type[Exception]) -> Iterator[None]:
    """asyncio's timeout and OS errors as the httpcore errors they stand for."""
    try:
        yield
    except TimeoutError as exc:
        raise timeout_error(str(exc) or "timed out") from exc
    except (OSError, ssl.SSLError, EOFError, asyncio.IncompleteReadError) as exc:
        raise other(str(exc) or type(exc).__name__) from exc


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection: an asyncio stream reader and writer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _mapped(httpcore.ReadTimeout, httpcore.ReadError):
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        with _mapped(httpcore.WriteTimeout, httpcore.WriteError):
            async with asyncio.timeout(timeout):
                self._writer.write(buffer)
                await self._writer.drain()

    async def aclose(self) -> None:
        # As anyio does: drop the connection at once (httpcore has read all it wants), then
        # let the loop run the transport's close callback, which releases the socket.
        transport = self._writer.transport
        if not transport.is_closing():
            transport.abort()
            await asyncio.sleep(0)

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
                async with asyncio.timeout(timeout):
                    await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except BaseException:
            await self.aclose()
            raise
        return self

    def get_extra_info(self, info: str) -> Any:
        writer = self._writer
        if info == "ssl_object":
            return writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return writer.get_extra_info("sockname")
        if info == "server_addr":
            return writer.get_extra_info("peername")
        if info == "socket":
            return writer.get_extra_info("socket")
        if info == "is_readable":
            sock = writer.get_extra_info("socket")
            return sock is not None and is_socket_readable(sock)
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """TCP connections on asyncio streams (TCP_NODELAY set, as asyncio does for TCP)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_READ_LIMIT, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        options = list(socket_options or ())
        with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
            async with asyncio.timeout(timeout):
                if options:
                    transport, _ = await loop.create_connection(
                        lambda: protocol, sock=await _connected_socket(host, port, options)
                    )
                else:
                    transport, _ = await loop.create_connection(
                        lambda: protocol,
                        host,
                        port,
                        local_addr=(local_address, 0) if local_address else None,
                    )
        return AsyncioStream(reader, asyncio.StreamWriter(transport, protocol, reader, loop))

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not supported by this backend")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected_socket(
    host: str, port: int, options: list[httpcore.SOCKET_OPTION]
) -> socket.socket:
    """A non-blocking socket with ``options`` set, connected to ``host`` (an address)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        for option in options:
            sock.setsockopt(*option)
        await loop.sock_connect(sock, address)
    except BaseException:
        sock.close()
        raise
    return sock
