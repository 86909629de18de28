"""What the access log may print of a request: its path, never its query string.

A client can put a credential in the query string (``?api_key=…``, a token, a signed
URL). The service refuses such a key (only the header counts), but uvicorn's access line
prints the request target as it came, so the key would be in every log that keeps
those lines. ``redacted_target`` is the one rule: the path as it came, and for a query
string only the marker that there was one (a parameter's *name* can be the secret too).
``RedactedQuery`` applies it to every record of uvicorn's access logger, whatever handler
or format prints it.
"""

from __future__ import annotations

import logging

__all__ = ["QUERY_REDACTED", "RedactedQuery", "redacted_target"]

#: What stands for a query string in the access log.
QUERY_REDACTED = "?[query redacted]"


def redacted_target(target: str) -> str:
    """``target`` (a request's path and query) with its query string replaced by
    ``QUERY_REDACTED``; a target without one is returned as it is."""
    path, _, query = target.partition("?")
    return path + QUERY_REDACTED if query else path


class RedactedQuery(logging.Filter):
    """Rewrites uvicorn's access record (``client, method, target, version, status``) so
    its target goes through ``redacted_target``; other records pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (*args[:2], redacted_target(args[2]), *args[3:])
        return True
