"""What a one-shot run loads: only the command it runs, the adapters it is configured with,
and the heavy libraries (trafilatura, the model client, the ledger, TLS roots) when first
used. Each check runs in a fresh interpreter, where nothing is imported yet."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

from external_query_service.cli import build_parser
from external_query_service.net._backend import verifying_context
from external_query_service.settings import NetworkSettings
from tests.support.paths import REPO

ROOT = REPO


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_search_only_service_loads_no_model_ledger_other_adapter_or_extractor() -> None:
    loaded = loaded_after(
        "from external_query_service import ExternalQueryService, Settings\n"
        "settings = Settings.from_mapping({'adapters': [{'kind': 'searxng', 'id': 's', "
        "'base_url': 'http://127.0.0.1:9/searx'}]})\n"
        "ExternalQueryService(settings).close()\n"
    )
    assert "external_query_service.adapters._searxng" in loaded
    for lazy in (
        "external_query_service.llm",
        "external_query_service.storage",
        "external_query_service.toolkit",
        "external_query_service.adapters._local_docs",
        "external_query_service.adapters._mcp_docs",
        "trafilatura",
        "htmldate",
        "publicsuffixlist",
    ):
        assert lazy not in loaded, lazy


def test_an_llm_and_a_ledger_are_loaded_when_configured(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    loaded = loaded_after(
        "from external_query_service import ExternalQueryService, Settings\n"
        "settings = Settings.from_mapping({'adapters': [{'kind': 'searxng', 'id': 's', "
        "'base_url': 'http://127.0.0.1:9/searx'}], "
        "'llm': {'base_url': 'http://127.0.0.1:9/v1', 'model': 'm'}, "
        f"'ledger': {{'path': {str(ledger)!r}}}}})\n"
        "ExternalQueryService(settings).close()\n"
    )
    assert "external_query_service.llm._client" in loaded
    assert "external_query_service.storage" in loaded


def test_the_cli_registers_only_the_command_it_runs() -> None:
    only = build_parser("ask")._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert list(only) == ["ask"]
    every = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"ask", "eval", "record", "serve"} <= set(every)
    # A name that is no module of its own (a toolkit or ledger command) still gets them all.
    assert set(build_parser("run-task")._subparsers._group_actions[0].choices) == set(every)  # type: ignore[union-attr]


def test_a_one_shot_ask_imports_no_other_command(tmp_path: Path) -> None:
    (tmp_path / "guide.md").write_text("# Guide\n\nThe verifier checks origins.\n", "utf-8")
    loaded = loaded_after(
        "import contextlib, io\n"
        "from external_query_service.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main(['ask', 'What does the verifier check?', '--docs', {str(tmp_path)!r}])\n"
        "assert code == 0\n"
    )
    assert "external_query_service.cli.ask" in loaded
    for other in ("cli.evidence", "cli.toolkit", "cli.eval", "cli.record", "testing.world"):
        assert f"external_query_service.{other}" not in loaded, other


def test_certifi_roots_wait_for_the_first_tls_connection() -> None:
    context = verifying_context(NetworkSettings())
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.get_ca_certs() == []  # nothing parsed yet
    context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="example.com")
    assert len(context.get_ca_certs()) > 50


def test_the_program_flushes_its_whole_answer_before_it_exits_at_once(tmp_path: Path) -> None:
    (tmp_path / "guide.md").write_text(
        "# Guide\n\n" + "The verifier checks origins, targets and time ranges. " * 200, "utf-8"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "external_query_service.cli", "ask", "What does the verifier "
         "check?", "--docs", str(tmp_path), "--format", "json"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "answered"  # the whole JSON document arrived
    bad = subprocess.run(
        [sys.executable, "-m", "external_query_service.cli", "ask", "q", "--config", "nope.toml"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "settings file not found" in bad.stderr
