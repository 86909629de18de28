"""The services some tests need (PostgreSQL, Redis, Chromium): skipped where one is not
there, except where the environment says they must be."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

#: Set (to 1) where the services must be there — CI: a test that needs PostgreSQL or Redis
#: then fails instead of skipping when the service does not answer.
REQUIRE_SERVICES = "EXTERNAL_QUERY_REQUIRE_SERVICES"


def service_missing(service: str, why: str) -> NoReturn:
    """Skip the test — or fail it where ``EXTERNAL_QUERY_REQUIRE_SERVICES=1``."""
    if os.environ.get(REQUIRE_SERVICES, "") not in ("", "0"):
        pytest.fail(f"{service} is required ({REQUIRE_SERVICES} is set) but {why}")
    pytest.skip(f"{service} is not available: {why}")
