"""What the MCP tests share: the stdio server's command line and settings, and reading
tool results with the SDK's own types.

It imports the ``mcp`` SDK (the ``mcp`` extra): a test module imports it after
``pytest.importorskip("mcp")``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters
from mcp.types import CallToolResult

from external_query_service.testing import World
from tests.support.paths import REPO
from tests.support.toolkit_tasks import write

#: The tools the stdio server lists without a task.
TOOLS = {"observe", "arguments", "operate", "answer", "read_evidence"}


def settings_file(folder: Path, world: World) -> Path:
    """``folder/settings.toml`` for the server: the loopback network (``world``'s sites and
    ``docs.test``) and ``world``'s SearXNG; pages analysed in a thread of the server's own
    process, as ``World.settings`` does (no worker interpreters started for a question)."""
    hosts = sorted(world.sites | {"docs.test"})
    resolve = "".join(f'"{host}" = "127.0.0.1"\n' for host in hosts)
    return write(
        folder / "settings.toml",
        "[analysis]\nprocesses = 0\n"
        '[network]\nallowed_networks = ["127.0.0.1/32"]\ntimeout_s = 5.0\ndeadline_s = 10.0\n'
        f"[network.resolve]\n{resolve}"
        f'[[adapters]]\nkind = "searxng"\nid = "searx"\nbase_url = "{world.base("/searx")}"\n',
    )


def structured(result: CallToolResult) -> dict[str, Any]:
    """A successful tool call's structured content."""
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def error_text(result: CallToolResult) -> str:
    """A failed tool call's text."""
    assert result.is_error
    return " ".join(getattr(item, "text", "") for item in result.content)


def server_params(*args: str) -> StdioServerParameters:
    """``external-query mcp *args`` from the repository, clocked at the tests' fixed "now"."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "external_query_service.cli", "mcp", *args, "--now", "2026-11-30T10:00+08:00"],
        cwd=str(REPO),
    )
