"""The collector settings a serving process applies to itself: each case runs in a fresh
interpreter, so the test process's own collector is never changed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from external_query_service import tune_collector
from tests.support.paths import REPO


def _run(script: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_threshold_is_set_and_the_older_generations_keep_theirs() -> None:
    found = _run(
        """
        import gc, json
        from external_query_service import tune_collector
        gc.set_threshold(700, 11, 12)
        tune_collector(10_000)
        print(json.dumps({"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
        """
    )
    assert found == {"threshold": [10_000, 11, 12], "frozen": 0}


def test_freezing_moves_what_the_process_holds_out_of_the_collectors_sight() -> None:
    found = _run(
        """
        import gc, json
        from external_query_service import tune_collector
        before = gc.get_threshold()
        held = [[index] for index in range(1000)]
        tune_collector(0, freeze=True)
        print(json.dumps({
            "same_threshold": gc.get_threshold() == before,
            "frozen": gc.get_freeze_count(),
            "tracked_after": len(gc.get_objects()),
        }))
        """
    )
    assert found["same_threshold"] is True
    assert found["frozen"] >= 1000  # the lists held, and what importing the library made
    assert found["tracked_after"] < 1000


def test_a_negative_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="threshold"):
        tune_collector(-1)


@pytest.mark.parametrize("owns_process", [True, False])
def test_only_an_app_that_owns_its_process_tunes_the_collector(owns_process: bool) -> None:
    # serve's app sets [server] gc_threshold and freezes once warm; a host's app (a thread
    # in the host's process) leaves the host's collector alone.
    found = _run(
        f"""
        import gc, json, sys, time
        from fastapi.testclient import TestClient
        from external_query_service import ExternalQueryService, Settings
        from external_query_service.server import create_app
        settings = Settings.from_mapping(
            {{"analysis": {{"processes": 0}}, "server": {{"gc_threshold": 4321}}}}
        )
        service = ExternalQueryService(settings)
        with TestClient(create_app(service, owns_process={owns_process})) as client:
            # Warm once the text pipeline is loaded (in this process: no workers); the
            # collector is tuned right after that, or never.
            deadline = time.monotonic() + 60
            while "htmldate" not in sys.modules and time.monotonic() < deadline:
                client.get("/healthz")
                time.sleep(0.05)
            while gc.get_freeze_count() == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
                if not {owns_process}:
                    time.sleep(1.0)
                    break
            print(json.dumps({{"threshold": gc.get_threshold()[0],
                               "frozen": gc.get_freeze_count() > 0,
                               "warm": "htmldate" in sys.modules}}))
        """
    )
    if owns_process:
        assert found == {"threshold": 4321, "frozen": True, "warm": True}
    else:
        assert found == {"threshold": 700, "frozen": False, "warm": True}
