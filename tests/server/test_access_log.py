"""The access log of ``external-query serve``: a credential in a query string is never
printed; the path still is."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from external_query_service.server._access_log import QUERY_REDACTED, redacted_target
from tests.support.paths import REPO
from tests.support.serving import CLI, write_docs

SECRET = "sk-live-Q7c2VbP0m1nTz9"


def test_a_target_keeps_its_path_and_loses_its_query() -> None:
    assert redacted_target("/v1/evidence/ev:1?api_key=" + SECRET) == "/v1/evidence/ev:1" + (
        QUERY_REDACTED
    )
    assert redacted_target("/v1/answer?" + SECRET) == "/v1/answer" + QUERY_REDACTED
    assert redacted_target("/healthz") == "/healthz"
    assert redacted_target("/healthz?") == "/healthz"


def test_a_key_in_the_query_string_is_refused_and_never_logged(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    log = tmp_path / "serve.log"
    config = tmp_path / "serve.toml"
    config.write_text('[server]\napi_keys_env = "EQ_ACCESS_KEYS"\n', encoding="utf-8")
    docs = str(write_docs(tmp_path / "docs"))
    command = [*CLI, "serve", "--config", str(config), "--docs", docs, "--port", "0"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "EQ_ACCESS_KEYS": "right-key"}
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, text=True
        )
    try:
        url = None
        for _ in range(600):
            found = re.search(r"Serving on (http://\S+)", log.read_text(encoding="utf-8"))
            if found and "Application startup complete" in log.read_text(encoding="utf-8"):
                url = found.group(1)
                break
            assert process.poll() is None, log.read_text(encoding="utf-8")
            time.sleep(0.1)
        assert url is not None, log.read_text(encoding="utf-8")
        refused = httpx.get(f"{url}/v1/evidence/ev:none?api_key={SECRET}&x=1", timeout=30)
        named = httpx.get(f"{url}/healthz?{SECRET}", timeout=30)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    text = log.read_text(encoding="utf-8")

    assert refused.status_code == 401
    assert named.status_code == 200
    assert SECRET not in text
    # The access lines are still there, with their paths.
    assert f'"GET /v1/evidence/ev:none{QUERY_REDACTED} HTTP/1.1" 401' in text
    assert f'"GET /healthz{QUERY_REDACTED} HTTP/1.1" 200' in text
