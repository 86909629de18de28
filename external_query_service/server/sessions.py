"""Follow-up sessions kept in memory: bounded in number and in idle time.

Each session keeps only its last plan (``Session(history_limit=0)``), which is all a follow-up
needs. Beyond ``max_sessions`` the least recently used is dropped; one unused for
``idle_s`` seconds is dropped on the next lookup. The table lives on the server's event loop,
so it needs no lock.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

from ..service import Session

__all__ = ["SessionTable"]


class SessionTable:
    """The server's sessions, bounded in number and idle age (the oldest go first)."""

    def __init__(
        self,
        *,
        max_sessions: int,
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self._clock = clock
        # Least recently used first: eviction and expiry both take from the front.
        self._sessions: OrderedDict[str, tuple[Session, float]] = OrderedDict()

    def add(self, session: Session) -> str:
        """Keep ``session``; returns its new id (unguessable, URL-safe)."""
        self._expire()
        session_id = secrets.token_urlsafe(18)
        self._sessions[session_id] = (session, self._clock())
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session_id

    def get(self, session_id: str) -> Session:
        """The session, marked as just used; ``KeyError`` when unknown, dropped or expired."""
        self._expire()
        session, _ = self._sessions.pop(session_id)
        self._sessions[session_id] = (session, self._clock())
        return session

    def _expire(self) -> None:
        oldest = self._clock() - self.idle_s
        while self._sessions:
            _, (_, used) = next(iter(self._sessions.items()))
            if used > oldest:
                return
            self._sessions.popitem(last=False)

    def __len__(self) -> int:
        return len(self._sessions)
