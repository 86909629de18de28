"""How many questions a service works on at once, across every event loop and thread.

A service answers on whichever loop calls ``aanswer``: a web server's, a caller's
``asyncio.run``, its own private loop for the sync API. An ``asyncio.Semaphore`` belongs to
one loop, so it cannot hold a limit shared by all of them. ``QuestionGate`` keeps the count
under a thread lock and wakes each waiter on its own loop, first come, first served; a freed
slot passes straight to the next waiter, so a newcomer never overtakes the queue.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["QuestionGate"]


class _Waiter:
    __slots__ = ("future", "granted", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        #: Set under the gate's lock when a slot is handed over; the future only wakes.
        self.granted = False


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():  # a waiter that timed out has cancelled it already
        future.set_result(None)


class QuestionGate:
    """At most ``limit`` questions inside at once; others wait in line up to a timeout."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the limit must be at least 1")
        self.limit = limit
        self._active = 0
        self._waiters: deque[_Waiter] = deque()
        self._lock = threading.Lock()

    @property
    def active(self) -> int:
        """Questions inside the gate now."""
        return self._active

    @property
    def waiting(self) -> int:
        """Questions waiting in line now."""
        return len(self._waiters)

    @asynccontextmanager
    async def enter(self, timeout_s: float) -> AsyncIterator[bool]:
        """Yields True once inside (the slot is freed on exit), or False when no slot came
        free within ``timeout_s`` seconds (0: do not wait). Cancelling a waiter frees its
        place in line, or its slot if one had just been handed to it."""
        admitted = await self._acquire(timeout_s)
        try:
            yield admitted
        finally:
            if admitted:
                self._release()

    async def _acquire(self, timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._active < self.limit and not self._waiters:
                self._active += 1
                return True
            if timeout_s <= 0:
                return False
            waiter = _Waiter(loop)
            self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                await waiter.future
        except TimeoutError:
            # A slot handed over just as the wait ran out is this question's all the same.
            return self._leave_line(waiter)
        except asyncio.CancelledError:
            if self._leave_line(waiter):
                self._release()  # handed over, but this task is going away: pass it on
            raise
        return True

    def _leave_line(self, waiter: _Waiter) -> bool:
        """Step out of line; True when a slot had already been handed to ``waiter``."""
        with self._lock:
            if not waiter.granted:
                self._waiters.remove(waiter)
            return waiter.granted

    def _release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                try:
                    waiter.loop.call_soon_threadsafe(_wake, waiter.future)
                except RuntimeError:  # its loop has closed: nobody waits there any more
                    continue
                waiter.granted = True  # the slot moves to the waiter; the count stays
                return
            self._active -= 1
