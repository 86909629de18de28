"""What the access log may print of a request: its path, never its query string.

A client can put a credential in the query string (``?api_key=…``, a token, a signed
URL). The service refuses such a key (only the header counts), but uvicorn's access line
prints the request target as it came, so the key would be in every log that keeps
those lines. ``redacted_target`` is the one rule: the path as it came, and for a query
string only the marker that there was one (a parameter's *name* can be the secret too).
The access line (``_logs``) prints every target through it.
"""

from __future__ import annotations

__all__ = ["QUERY_REDACTED", "redacted_target"]

#: What stands for a query string in the access log.
QUERY_REDACTED = "?[query redacted]"


def redacted_target(target: str) -> str:
    """``target`` (a request's path and query) with its query string replaced by
    ``QUERY_REDACTED``; a target without one is returned as it is."""
    path, _, query = target.partition("?")
    return path + QUERY_REDACTED if query else path
