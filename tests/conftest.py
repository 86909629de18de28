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
