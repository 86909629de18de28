"""A private event loop on a daemon thread, so the sync API works everywhere — including
inside a caller's running event loop, where ``asyncio.run`` would refuse.

HTTP clients are bound to the loop that made them; the sync API always uses this one
loop, so its clients live as long as the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["Portal"]

T = TypeVar("T")


class Portal:
    """One event loop on a daemon thread, started on first use: ``call`` runs a coroutine
    there from any thread and waits for it; ``stop`` finishes its work and ends the thread."""

    def __init__(self, name: str = "external-query-portal") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def loop(self) -> asyncio.AbstractEventLoop:
        """The portal's loop, started on first use."""
        return self._start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the portal loop and wait for its result."""
        loop = self._start()
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("Portal.call() from the portal's own loop would deadlock")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    @property
    def running(self) -> bool:
        """Whether the loop has started and not been stopped."""
        return self._loop is not None

    def stop(self) -> None:
        """Finish the loop's async generators and executor threads, stop it and join its
        thread; the next ``call`` starts a new loop."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        # Finish async generators (httpx streams) on their own loop before stopping it, and
        # join the worker threads of its default executor (page analysis, DNS, the ledger):
        # loop.close() alone would leave them alive.
        asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(timeout=5)
        workers = asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop)
        with contextlib.suppress(TimeoutError):  # a worker still busy is left to finish alone
            workers.result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()
