"""Fixtures for the framework integrations.

The framework tests skip (``pytest.importorskip``) where LangChain or LlamaIndex is not
installed; ``.ci/integrations`` runs them in a venv of their own and fails on any skip. The
LangChain standard suites are async and need pytest-asyncio's settings, which only that run
passes: ``-o asyncio_mode=auto -o asyncio_default_fixture_loop_scope=function``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from external_query_service import ExternalQueryService
from external_query_service.testing import World

from .support import news_service


@pytest.fixture
def news(world: World) -> Iterator[ExternalQueryService]:
    """A shared service on the loopback news world: four admitted pages on four sites."""
    with news_service(world) as service:
        yield service
