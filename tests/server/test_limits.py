"""One rate limit for every worker: ``serve --workers 2`` with ``[cache] url`` (a real Redis)
spends one token bucket per key, whichever worker takes the request."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx
import pytest

from external_query_service import Settings
from external_query_service.testing.world_files import dump_toml
from tests.support.paths import REPO
from tests.support.serving import CLI, served_workers, write_docs

KEY = "k-workers-0123456789"
RATE = 3


def test_two_workers_enforce_one_rate_limit_through_redis(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    pytest.importorskip("uvicorn")
    import redis

    settings = Settings.from_mapping(
        {
            # Generous Redis timings: on a busy host a slow reply must not open the circuit
            # and leave each worker counting alone (the slow-Redis tests cover that rule).
            "cache": {
                "url": redis_url,
                "key_prefix": prefix,
                "redis_timeout_s": 5.0,
                "redis_slow_s": 5.0,
                "allow_unsigned": True,
            },
            "server": {"api_keys_env": "EQ_WORKER_KEYS", "requests_per_minute": RATE},
            # Pages analysed in a thread: no worker warms analysis processes it never uses.
            "analysis": {"processes": 0},
        }
    ).with_docs(write_docs(tmp_path / "docs"))
    config = tmp_path / "serve.toml"
    config.write_text(dump_toml(settings.model_dump(mode="json", exclude_none=True)), "utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "EQ_WORKER_KEYS": KEY}
    command = [*CLI, "serve", "--config", str(config), "--port", "0", "--workers", "2"]
    with served_workers(command, env) as (_process, url):
        pids = {httpx.get(f"{url}/healthz", timeout=30).json()["pid"] for _ in range(20)}
        statuses = [
            # A new connection each time, so the kernel hands them to either worker.
            httpx.get(f"{url}/v1/evidence/ev:none", headers={"X-API-Key": KEY}, timeout=30)
            for _ in range(4 * RATE)
        ]
        client = redis.Redis.from_url(redis_url)
        buckets = list(client.scan_iter(match=f"{prefix}rate:*"))
    passed = [reply for reply in statuses if reply.status_code != 429]
    refused = [reply for reply in statuses if reply.status_code == 429]
    assert len(pids) == 2  # both workers take requests
    # One bucket for the key in Redis: RATE requests pass (one more if a token came back).
    assert RATE <= len(passed) <= RATE + 1, [reply.status_code for reply in statuses]
    assert all(reply.status_code == 404 for reply in passed)  # let through to the route
    assert all(int(reply.headers["Retry-After"]) >= 1 for reply in refused)
    assert len(buckets) == 1
    hashed = hashlib.sha256(KEY.encode()).hexdigest()
    assert KEY.encode() not in buckets[0]
    assert hashed.encode() in buckets[0]
