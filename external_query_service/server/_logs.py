"""What ``serve`` logs, and how: one stream (stderr), as text or as JSON lines, at one level.

Three loggers write there: uvicorn's own (``uvicorn.error``: start-up, shutdown, failures),
the access line per request (``external_query_service.server.access``, written here by
``AccessLog`` in place of uvicorn's, which cannot know the request id) and the answer line
per question (``external_query_service.server.answers``, ``_correlation.log_answer``).
``--log-format json`` makes every line one JSON object (``time``, ``level``, ``logger`` and
the line's own fields, or ``message``); ``text`` (the default) is uvicorn's layout, the
answer line still its JSON. ``--log-level`` applies to all three.

The access line holds ``request_id`` (the ``X-Request-ID`` the response carried), the
client address, method, path, status and ``duration_ms``. A query string is never logged,
only the marker that there was one (``_access_log.redacted_target``): a client that puts a
key or a token in a URL, as a value or as a bare name, must not find it in a log.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from datetime import UTC, datetime
from typing import Any, Literal

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._access_log import redacted_target
from ._correlation import ANSWER_LOG

__all__ = [
    "ACCESS_LOG",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "AccessLog",
    "JsonLines",
    "LogFormat",
    "logged_target",
    "logging_config",
]

#: The logger of the one line per request.
ACCESS_LOG = logging.getLogger("external_query_service.server.access")
LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")
#: Query parameters whose values are logged as they are: the routes' own, all numbers.


class JsonLines(logging.Formatter):
    """Each record as one JSON object: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    then the record's ``fields`` (a dict given as ``extra={"fields": ...}``) or its
    ``message``, and ``error`` with the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        else:
            line["message"] = record.getMessage()
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def logging_config(log_format: LogFormat = "text", log_level: str = "info") -> dict[str, Any]:
    """The ``logging.config.dictConfig`` of ``serve``: every logger above on one stderr
    handler, in ``log_format``, at ``log_level``."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    level = log_level.upper()
    config["formatters"]["json"] = {"()": f"{__name__}.JsonLines"}
    config["formatters"]["line"] = {"format": "%(message)s"}
    chosen = "json" if log_format == "json" else "default"
    config["handlers"] = {
        "stderr": {
            "formatter": chosen,
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
        },
        # The answer line is JSON already: in text it stands alone, without a level prefix.
        "lines": {
            "formatter": "json" if log_format == "json" else "line",
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
        },
    }
    config["loggers"] = {
        "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
        "uvicorn.error": {"level": level},
        # Replaced by the access line here, which knows the request id.
        "uvicorn.access": {"handlers": [], "level": "CRITICAL", "propagate": False},
        ACCESS_LOG.name: {"handlers": ["stderr"], "level": level, "propagate": False},
        ANSWER_LOG.name: {"handlers": ["lines"], "level": level, "propagate": False},
    }
    return config


def logged_target(path: str, query: bytes) -> str:
    """``path`` and its query string as logged: the query string never, only the marker that
    there was one (``redacted_target``)."""
    return redacted_target(f"{path}?{query.decode('latin-1')}" if query else path)


class AccessLog:
    """ASGI middleware: one access line per HTTP request once its response has started
    (a streamed one logs its status and the time to its first byte)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not ACCESS_LOG.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def logged(message: Message) -> None:
            if message["type"] == "http.response.start":
                _log(scope, message, time.perf_counter() - started)
            await send(message)

        await self.app(scope, receive, logged)


def _log(scope: Scope, start: Message, seconds: float) -> None:
    headers = dict(start.get("headers", ()))
    client = scope.get("client")
    fields = {
        "request_id": headers.get(b"x-request-id", b"").decode("latin-1") or None,
        "client": f"{client[0]}:{client[1]}" if client else None,
        "method": scope["method"],
        "path": logged_target(scope["path"], scope.get("query_string", b"")),
        "status": start["status"],
        "duration_ms": round(seconds * 1000),
    }
    ACCESS_LOG.info(
        '%s - "%s %s HTTP/%s" %d %d ms request_id=%s',
        fields["client"] or "-",
        fields["method"],
        fields["path"],
        scope.get("http_version", "1.1"),
        fields["status"],
        fields["duration_ms"],
        fields["request_id"],
        extra={"fields": fields},
    )
