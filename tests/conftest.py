from __future__ import annotations

from collections.abc import Iterator

import pytest

from external_query_service.testing import LoopbackServer

from .llm_chat import ChatServer


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    """A started loopback server on 127.0.0.1 (routes by Host header and path)."""
    with LoopbackServer() as server:
        yield server


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    """A started loopback chat completions endpoint that replies from a script."""
    with ChatServer() as server:
        yield server


@pytest.fixture(scope="module")
def module_server() -> Iterator[LoopbackServer]:
    """One loopback server for a whole test module. Stopping a server waits out
    serve_forever's poll, which per test would double a busy module's run time."""
    with LoopbackServer() as server:
        yield server


@pytest.fixture
def shared_loopback(module_server: LoopbackServer) -> LoopbackServer:
    """The module's server with an empty request log. Its routes stay from test to test, so
    a module that uses it routes its own paths before each request (a module opts in by
    making its ``loopback`` this one)."""
    module_server.requests.clear()
    return module_server
