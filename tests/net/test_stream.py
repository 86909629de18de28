"""The asyncio network backend: connect, read, write, TLS, timeouts and errors as httpcore's."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable

import httpcore
import pytest

from external_query_service.net._backend import guarded_client
from external_query_service.net._stream import AsyncioBackend, AsyncioStream
from external_query_service.settings import NetworkSettings
from external_query_service.testing._tls import WorldCA

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    data = await reader.read(100)
    writer.write(b"echo:" + data)
    await writer.drain()
    writer.close()


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        await reader.read(100)
        await asyncio.sleep(5)
    finally:
        writer.close()


def _serve(handler: Handler, body: Callable[[int], Awaitable[None]], **kwargs: object) -> None:
    async def go() -> None:
        server = await asyncio.start_server(handler, "127.0.0.1", 0, **kwargs)  # type: ignore[arg-type]
        port = server.sockets[0].getsockname()[1]
        try:
            await body(port)
        finally:
            server.close()

    asyncio.run(go())


def test_a_connection_writes_reads_and_names_both_ends() -> None:
    async def body(port: int) -> None:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        assert isinstance(stream, AsyncioStream)
        assert stream.get_extra_info("server_addr")[:2] == ("127.0.0.1", port)
        assert stream.get_extra_info("client_addr")[0] == "127.0.0.1"
        assert stream.get_extra_info("ssl_object") is None
        await stream.write(b"ping", timeout=5)
        received = b""
        while chunk := await stream.read(1024, timeout=5):
            received += chunk
        assert received == b"echo:ping"
        await stream.aclose()
        await stream.aclose()  # closing twice is harmless

    _serve(_echo, body)


def test_a_read_past_its_timeout_is_a_read_timeout() -> None:
    async def body(port: int) -> None:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        await stream.write(b"ping")
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(1024, timeout=0.05)
        await stream.aclose()

    _serve(_silent, body)


def test_a_refused_connection_is_a_connect_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed at once: nothing listens there

    async def go() -> None:
        with pytest.raises(httpcore.ConnectError):
            await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)

    asyncio.run(go())


def test_socket_options_are_set_on_the_connection() -> None:
    async def body(port: int) -> None:
        options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
        stream = await AsyncioBackend().connect_tcp(
            "127.0.0.1", port, timeout=5, socket_options=options
        )
        sock = stream.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        await stream.write(b"opt")
        assert await stream.read(1024, timeout=5) == b"echo:opt"
        await stream.aclose()

    _serve(_echo, body)


def test_tls_is_started_on_the_connection_and_checked() -> None:
    ca = WorldCA()
    client = ssl.create_default_context()
    ca._ca.configure_trust(client)

    async def body(port: int) -> None:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        secured = await stream.start_tls(client, server_hostname="site.test", timeout=5)
        assert secured.get_extra_info("ssl_object") is not None
        await secured.write(b"tls")
        assert await secured.read(1024, timeout=5) == b"echo:tls"
        await secured.aclose()

        untrusting = ssl.create_default_context()  # the world's CA is not among its roots
        plain = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        with pytest.raises(httpcore.ConnectError):
            await plain.start_tls(untrusting, server_hostname="site.test", timeout=5)

    _serve(_echo, body, ssl=ca.server_context())


def test_the_guarded_client_connects_through_it() -> None:
    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    async def body(port: int) -> None:
        network = NetworkSettings()
        trusted = [("127.0.0.1", port)]
        async with guarded_client(network, headers={}, trusted_origins=trusted) as client:
            response = await client.get(f"http://127.0.0.1:{port}/")
        assert response.text == "ok"
        assert isinstance(response.extensions["network_stream"], AsyncioStream)

    _serve(reply, body)


def test_the_guarded_client_keeps_no_cookie_and_sends_none() -> None:
    requests: list[bytes] = []

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(
            b"HTTP/1.1 200 OK\r\nSet-Cookie: track=1; Path=/\r\nContent-Length: 2\r\n"
            b"Connection: close\r\n\r\nok"
        )
        await writer.drain()
        writer.close()

    async def body(port: int) -> None:
        trusted = [("127.0.0.1", port)]
        async with guarded_client(NetworkSettings(), headers={}, trusted_origins=trusted) as client:
            await client.get(f"http://127.0.0.1:{port}/first")
            client.cookies.set("added", "by-a-caller")
            client.cookies = {"given": "at-construction"}
            second = await client.get(f"http://127.0.0.1:{port}/second")
            assert second.text == "ok"
            assert not client.cookies  # neither the reply's cookie nor the caller's is held

    _serve(reply, body)
    assert len(requests) == 2
    assert all(b"cookie:" not in request.lower() for request in requests)
