"""``external-query init``: write a commented starter ``./external-query.toml``.

Exit codes: 0 written; 2 the file already exists (it is never overwritten) or cannot be
written (one line on stderr).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import InputError
from ._help import Subparsers, add_command

__all__ = ["STARTER", "STARTER_NAME", "register"]

#: Where ``init`` writes, in the current folder.
STARTER_NAME = "external-query.toml"

#: The starter settings: the keyless fact APIs on, a local search service and the network
#: rule it needs explained, the rest commented out. Every key is in docs/settings.md.
STARTER = """\
# external-query settings (every key: docs/settings.md). Try:
#   external-query ask "USD to EUR today?" --config external-query.toml \\
#       --kind exchange_rate --entity USD --entity EUR

[network]
# Private and loopback addresses are refused unless their networks are listed here: a
# search service on this machine (SearXNG on 127.0.0.1) needs its network listed.
allowed_networks = ["127.0.0.1/32", "::1/128"]

# Weather from Open-Meteo, no key: --kind weather --location Paris
[[adapters]]
kind = "open_meteo"

# Exchange rates from Frankfurter, no key: --kind exchange_rate --entity USD --entity EUR
[[adapters]]
kind = "frankfurter"

# Web search through your own SearXNG (with `search: formats: [html, json]` in its
# settings.yml). Uncomment, and check the port: a refused connection exits 3.
# [[adapters]]
# kind = "searxng"
# base_url = "http://127.0.0.1:8888"

# Your own documents (Markdown, text, PDF): --kind documentation, or ask --docs DIR.
# [[adapters]]
# kind = "local_docs"
# root = "docs"

# Pages whose text their scripts write, read in a headless Chromium
# (pip install 'external_query_service[browser]' and apt-get install chromium).
# [browser]
# mode = "fallback"

# external-query serve: API keys come from this environment variable (comma-separated).
# [server]
# api_keys_env = "EXTERNAL_QUERY_API_KEYS"
"""


def register(commands: Subparsers) -> None:
    """Add the ``init`` command to ``commands``."""
    init = add_command(
        commands,
        "init",
        summary=f"write a commented starter ./{STARTER_NAME}",
        description=f"Write a commented starter ./{STARTER_NAME}: the keyless weather and "
        "exchange-rate\nAPIs on, a local search service and the network rule it needs "
        "explained.",
        exit_codes=[
            (0, f"./{STARTER_NAME} written"),
            (2, "the file already exists (never overwritten) or cannot be written"),
        ],
        examples=[
            "external-query init",
            "external-query init && external-query ask 'USD to EUR today?' \\\n"
            "--config external-query.toml --kind exchange_rate --entity USD --entity EUR",
        ],
    )
    init.set_defaults(handler=_run)


def _run(_args: argparse.Namespace) -> int:
    target = Path(STARTER_NAME)
    try:
        with target.open("x", encoding="utf-8") as written:  # "x": never overwrite
            written.write(STARTER)
    except FileExistsError:
        raise InputError(f"{STARTER_NAME} already exists; it was left as it is") from None
    except OSError as exc:
        raise InputError(f"cannot write {STARTER_NAME}: {exc.strerror or exc}") from None
    print(f"wrote {STARTER_NAME}; try: external-query ask --help")
    return 0
