"""The HTTP service: one long-lived ``ExternalQueryService`` behind an ASGI app.

``external-query serve`` runs ``create_app`` under uvicorn (``run.serve``). Routes:
``POST /v1/answer`` and ``POST /v1/sessions/{session_id}/follow-up`` (the ``ask --format
json`` answer plus a ``session_id``), ``GET /v1/evidence/{ref}`` (bounded reads of stored
captures), ``POST /v1/chat/completions`` and ``GET /v1/models`` (OpenAI's chat-completions
format, for chat front-ends: ``_chat``), ``GET /healthz``, ``GET /readyz`` (the adapters'
probes; 503 when none is ready), ``GET /metrics`` (Prometheus text) and ``GET
/openapi.json``. Bad input of any shape is a 4xx
with ``{"error": {"reason": ..., "message": ...}}``.

FastAPI, uvicorn and prometheus_client are the optional ``[server]`` extra: they are imported
only when an app is built, and a missing extra is a ``ServerUnavailable`` error naming the
install command.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ..errors import ServerUnavailable

if TYPE_CHECKING:
    from ._app import create_app
    from ._metrics import ServerMetrics
    from ._run import ServerThread, serve

__all__ = [
    "INSTALL_HINT",
    "ServerMetrics",
    "ServerThread",
    "ServerUnavailable",
    "create_app",
    "require_server_extra",
    "serve",
]

INSTALL_HINT = ServerUnavailable.install_hint
#: The import names the ``[server]`` extra provides.
_EXTRA = ("fastapi", "uvicorn", "prometheus_client")


def require_server_extra() -> None:
    """Raise ``ServerUnavailable`` unless every package of the extra is importable."""
    for name in _EXTRA:
        if importlib.util.find_spec(name) is None:
            raise ServerUnavailable(name)


_EXPORTS = {
    "ServerMetrics": "._metrics",
    "ServerThread": "._run",
    "create_app": "._app",
    "serve": "._run",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
