"""Fixtures the toolkit tests share."""

from __future__ import annotations

import pytest

from external_query_service.testing import LoopbackServer
from tests.support.toolkit_tasks import serve_docs


@pytest.fixture
def docs(loopback: LoopbackServer) -> LoopbackServer:
    """The docs site (index → guide → licence, and an off-origin page) on the loopback server."""
    return serve_docs(loopback)
