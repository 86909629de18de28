"""Follow-up sessions: in this process's memory, or in the shared cache (Redis) so that a
follow-up reaches its session whichever worker process takes it.

Each session keeps only its last plan (``Session(history_limit=0)``), which is all a follow-up
needs. In memory: beyond ``max_sessions`` the least recently used is dropped; one unused for
``idle_s`` seconds is dropped on the next lookup; the table lives on the server's event loop,
so it needs no lock. Shared (``SharedSessionTable``): the plan as JSON under the session id,
expiring after ``idle_s`` unused (Redis bounds the number by memory, not ``max_sessions``);
when Redis cannot be reached a new session is not kept and a follow-up finds none (404).

The routes call ``aadd``, ``aget`` and ``asave``: the in-memory table answers inline, the
shared one makes its Redis round trip in a worker thread, so a slow Redis never holds the
event loop (``/healthz`` and every other question go on meanwhile).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

from pydantic import ValidationError

from ..models import ExternalQueryPlan
from ..service import ExternalQueryService, Session
from ..storage._redis_cache import RedisValues

__all__ = ["SESSION_KEY_PREFIX", "SessionTable", "SharedSessionTable"]

#: Where a shared session's plan is kept, under the shared cache's value keys.
SESSION_KEY_PREFIX = "session:"


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

    def save(self, session_id: str, session: Session) -> None:
        """Nothing to do: the table holds the session object itself."""

    async def aadd(self, session: Session) -> str:
        """``add``, inline (the table lives on the event loop)."""
        return self.add(session)

    async def aget(self, session_id: str) -> Session:
        """``get``, inline."""
        return self.get(session_id)

    async def asave(self, session_id: str, session: Session) -> None:
        """``save``, inline."""

    def _expire(self) -> None:
        oldest = self._clock() - self.idle_s
        while self._sessions:
            _, (_, used) = next(iter(self._sessions.items()))
            if used > oldest:
                return
            self._sessions.popitem(last=False)

    def __len__(self) -> int:
        return len(self._sessions)


class SharedSessionTable:
    """Sessions every worker sees: each one's last plan as JSON in the shared cache, dropped
    after ``idle_s`` unused."""

    def __init__(self, values: RedisValues, service: ExternalQueryService, *, idle_s: float):
        self.idle_s = idle_s
        self._values = values
        self._service = service

    def add(self, session: Session) -> str:
        """Keep ``session`` (its last plan); returns its new id."""
        session_id = secrets.token_urlsafe(18)
        self.save(session_id, session)
        return session_id

    def get(self, session_id: str) -> Session:
        """The session rebuilt from its plan, its idle time restarted; ``KeyError`` when
        unknown, expired, unreadable or Redis cannot be reached."""
        data = self._values.get(SESSION_KEY_PREFIX + session_id, self.idle_s)
        if data is None:
            raise KeyError(session_id)
        try:
            plan = ExternalQueryPlan.model_validate_json(data)
        except ValidationError:
            raise KeyError(session_id) from None
        return self._service.session(history_limit=0, last_plan=plan)

    async def aadd(self, session: Session) -> str:
        """``add`` with its Redis round trip off the event loop."""
        return await asyncio.to_thread(self.add, session)

    async def aget(self, session_id: str) -> Session:
        """``get`` with its Redis round trip off the event loop."""
        return await asyncio.to_thread(self.get, session_id)

    async def asave(self, session_id: str, session: Session) -> None:
        """``save`` with its Redis round trip off the event loop."""
        await asyncio.to_thread(self.save, session_id, session)

    def save(self, session_id: str, session: Session) -> None:
        """Keep the session's last plan for ``idle_s`` (best effort)."""
        plan = session.last_plan
        if plan is not None:
            self._values.set(
                SESSION_KEY_PREFIX + session_id, plan.model_dump_json().encode(), self.idle_s
            )
