from __future__ import annotations

from collections.abc import Iterator

import pytest

from external_query_service.testing import LoopbackServer


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    """A started loopback server on 127.0.0.1 (routes by Host header and path)."""
    with LoopbackServer() as server:
        yield server
