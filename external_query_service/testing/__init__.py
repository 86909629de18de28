"""Test support that hosts can use too: a loopback server speaking the adapters' formats."""

from .server import LoopbackServer, RecordedRequest, Reply, json_reply

__all__ = ["LoopbackServer", "RecordedRequest", "Reply", "json_reply"]
