"""Sharing work: a size-bounded LRU map, and single-flight for identical calls in flight.

Pure helpers with no I/O of their own: the response cache (``net/_cache.py``), the evidence
store and the page-analysis memo build on them. ``SharedStore`` is what a store shared
between processes offers them (``storage/_redis_cache.py`` is one); ``SharedMemo`` is what
``ThreadMemo`` keeps its results in besides its own memory.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "Digested",
    "SharedMemo",
    "SharedStore",
    "SingleFlight",
    "SizedLRU",
    "ThreadMemo",
    "held_bytes",
    "memo_key",
]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")


_ATOMS = (str, bytes, int, float, bool, type(None), type)


def held_bytes(root: object) -> int:
    """The memory ``root`` holds as Python allocated it: ``sys.getsizeof`` of every object
    reachable from it through containers (tuple, list, set, dict) and instance attributes
    (``__dict__`` or ``__slots__``), each object once. Classes, functions and modules are not
    followed. What a bound in bytes must count: a page analysis holds its term counts besides
    its text, and a Chinese text two bytes or more a character, where ``len(text)`` would
    count one."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, _ATOMS):
            continue
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, tuple | list | set | frozenset):
            stack.extend(item)
        elif callable(item) or type(item).__module__ == "builtins":
            continue
        else:
            attributes = getattr(item, "__dict__", None)
            if attributes is not None:
                stack.append(attributes)
            for name in getattr(type(item), "__slots__", ()):
                if hasattr(item, name):
                    stack.append(getattr(item, name))
    return total


class SizedLRU(Generic[K, V]):
    """A map whose values' sizes add up to at most ``max_size``; least recently used out.

    ``get`` and ``put`` count as use. ``keep(key)`` (optional) names entries that must not
    be evicted now; while only such entries are left the total may exceed the bound, and
    ``trim()`` brings it back down once they are released. A value larger than the whole
    bound is not kept. Thread-safe.
    """

    def __init__(
        self,
        max_size: int,
        size: Callable[[V], int],
        *,
        keep: Callable[[K], bool] | None = None,
        on_evict: Callable[[K, V], None] | None = None,
    ) -> None:
        self.max_size = max_size
        self._size = size
        self._keep = keep
        self._on_evict = on_evict
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.RLock()

    @property
    def total(self) -> int:
        """The sizes of the values held, added up."""
        return self._total

    def get(self, key: K) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: K, value: V, *, trim: bool = True) -> bool:
        """Keep ``value`` (replacing what ``key`` held); False when it alone exceeds the bound.
        ``trim=False`` leaves the total past the bound for the caller's own ``trim``."""
        size = self._size(value)
        with self._lock:
            self._drop(key)
            if size > self.max_size:
                return False
            self._items[key] = (value, size)
            self._total += size
            if trim:
                self.trim()
            return key in self._items

    def pop(self, key: K) -> V | None:
        """Remove and return the value under ``key``, or None."""
        with self._lock:
            item = self._items.get(key)
            self._drop(key)
            return None if item is None else item[0]

    def trim(self, keep: Callable[[K], bool] | None = None) -> None:
        """Evict least recently used entries (skipping kept ones: ``keep``, by default the
        map's own) until under the bound."""
        keep = self._keep if keep is None else keep
        with self._lock:
            excess = self._total - self.max_size
            if excess <= 0:
                return
            # The victims first (least recently used, not kept, until enough room), then
            # out: a walk that stops there, not a copy of every key per trim.
            victims: list[K] = []
            for key, (_, size) in self._items.items():
                if keep is not None and keep(key):
                    continue
                victims.append(key)
                excess -= size
                if excess <= 0:
                    break
            for key in victims:
                value = self._items[key][0]
                self._drop(key)
                if self._on_evict is not None:
                    self._on_evict(key, value)

    def _drop(self, key: K) -> None:
        item = self._items.pop(key, None)
        if item is not None:
            self._total -= item[1]

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def keys(self) -> Iterator[K]:
        """A snapshot of the keys, least recently used first."""
        with self._lock:
            return iter(list(self._items))


class SharedStore(Protocol):
    """Entries (metadata bytes plus a body) kept where several processes see them, bounded
    in bytes (least recently used out), each for at most ``ttl_s``; plus short claims
    ("leases") so that one process at a time does a piece of work.

    Every method is a best effort that never raises: a store that cannot be reached answers
    as if empty (``get`` None, ``put`` False, ``claimed`` False) and ``claim`` gives a token
    anyway (``""``: go ahead without one).
    """

    def get(self, key: str) -> tuple[bytes, bytes] | None:
        """The metadata and body under ``key`` (now the most recently used), or None."""
        ...

    def put(self, key: str, meta: bytes, body: bytes, *, ttl_s: float) -> bool:
        """Keep an entry for at most ``ttl_s``; False when not kept."""
        ...

    def delete(self, key: str) -> None:
        """Drop the entry under ``key``, if any."""
        ...

    def claim(self, name: str, ttl_s: float) -> str | None:
        """Take the lease ``name`` for ``ttl_s``: a token to release it with (``""`` when the
        store cannot coordinate: go ahead without a lease), or None while another holds it."""
        ...

    def claimed(self, name: str) -> bool:
        """True while someone holds the lease ``name``."""
        ...

    def release(self, name: str, token: str) -> None:
        """Give the lease back, if ``token`` still holds it."""
        ...

    def total(self) -> int:
        """Bytes held, as the store accounts them (0 when it cannot be reached)."""
        ...

    def count(self) -> int:
        """Entries held (0 when it cannot be reached)."""
        ...


class SharedMemo(Protocol):
    """Where ``ThreadMemo`` also keeps results: visible to other processes, best effort."""

    def get(self, key: str) -> Any | None:
        """The result kept under ``key``, or None."""
        ...

    def put(self, key: str, value: Any) -> None:
        """Keep ``value`` under ``key`` (a value the memo cannot encode is not kept)."""
        ...


def memo_key(key: Hashable) -> str:
    """A stable text key for a memo key made of str, int, float, None and tuples of them
    (the same in every process: ``repr`` of those does not depend on hash seeds)."""
    return hashlib.sha256(repr(key).encode("utf-8")).hexdigest()


@dataclass
class _Flight:
    task: asyncio.Future[Any]
    waiters: int = 0
    #: Cancelled because no one waits any more: a newcomer starts a run of its own.
    abandoned: bool = False


class SingleFlight:
    """Identical calls in flight at the same moment share one run (per event loop).

    ``run(key, factory)``: if a call with ``key`` is running, wait for its result (or its
    exception); else start ``factory()`` as a task. Each caller's cancellation is its own:
    the shared run goes on while anyone still waits, and is cancelled when no one does.
    """

    def __init__(self) -> None:
        self._flights: dict[tuple[asyncio.AbstractEventLoop, Hashable], _Flight] = {}

    def in_flight(self) -> int:
        """How many calls are running now."""
        return len(self._flights)

    async def run(self, key: Hashable, factory: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` once for ``key``: callers arriving while it runs await the same result."""
        slot = (asyncio.get_running_loop(), key)
        flight = self._flights.get(slot)
        if flight is None or flight.abandoned:
            task = asyncio.ensure_future(factory())
            flight = self._flights[slot] = _Flight(task)
            task.add_done_callback(functools.partial(self._finished, slot, flight))
        flight.waiters += 1
        try:
            result: T = await asyncio.shield(flight.task)
            return result
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                flight.abandoned = True
                flight.task.cancel()

    def _finished(
        self,
        slot: tuple[asyncio.AbstractEventLoop, Hashable],
        flight: _Flight,
        _task: asyncio.Future[Any],
    ) -> None:
        if self._flights.get(slot) is flight:
            del self._flights[slot]
        if not flight.task.cancelled():
            flight.task.exception()  # retrieved: a failure no one waits for is not "lost"


@dataclass(frozen=True, slots=True)
class Digested:
    """An argument of ``ThreadMemo.run``: bytes whose ``sha256:<hex>`` digest the caller
    made already (a fetched page's ``raw_digest``). The memo keys them by that digest, the
    key it would have made itself, instead of hashing the same bytes a second time; the
    function is called with ``data``. The digest must be ``data``'s: the memo cannot tell."""

    data: bytes
    digest: str


def _key_part(value: Any) -> Hashable:
    """Bytes by digest (a key must not hold a page body), everything else as is."""
    if isinstance(value, Digested):
        return ("sha256", value.digest.removeprefix("sha256:"))
    if isinstance(value, bytes | bytearray | memoryview):
        return ("sha256", hashlib.sha256(value).hexdigest())
    if isinstance(value, list):
        return tuple(_key_part(item) for item in value)
    return value  # type: ignore[no-any-return]


def _plain(value: Any) -> Any:
    return value.data if isinstance(value, Digested) else value


class ThreadMemo:
    """Runs a pure function in a worker thread once per distinct arguments.

    ``run(fn, *args, **kwargs)`` is ``asyncio.to_thread(fn, *args, **kwargs)``, except that
    results are kept (at most ``max_size`` by ``size(result)``, least recently used out)
    and identical calls in flight share one run. Exceptions are not kept. With
    ``max_size == 0`` nothing is kept, but concurrent identical calls are still shared.
    Arguments must be hashable; bytes are keyed by their digest (``Digested`` bytes by the
    digest they come with, and passed to ``fn`` as plain bytes). With ``shared``, results
    are also looked up and kept there (under ``memo_key`` of the key), so other processes
    reuse them. ``on_hit`` (optional) is called whenever a kept result is used again, from
    this process's memo or from ``shared`` (a shared run in flight is not a hit).
    ``runner`` replaces ``asyncio.to_thread`` as where the function computes
    (``runner(fn, *args, **kwargs)``, awaited: a process pool, say); keeping and sharing stay
    the same.
    """

    def __init__(
        self,
        max_size: int = 0,
        size: Callable[[Any], int] = lambda _v: 1,
        *,
        shared: SharedMemo | None = None,
        on_hit: Callable[[], None] | None = None,
        runner: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        self._results: SizedLRU[Hashable, Any] = SizedLRU(max_size, size)
        self._flights = SingleFlight()
        self._shared = shared
        self._on_hit = on_hit
        self._runner = runner

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """The memoized result of ``function(*args)`` under ``key``, computed once in a worker
        thread."""
        key = (
            f"{fn.__module__}.{fn.__qualname__}",
            tuple(_key_part(arg) for arg in args),
            tuple(sorted((name, _key_part(value)) for name, value in kwargs.items())),
        )
        args = tuple(_plain(arg) for arg in args)
        kwargs = {name: _plain(value) for name, value in kwargs.items()}
        found = self._results.get(key)
        if found is not None:
            if self._on_hit is not None:
                self._on_hit()
            return found  # type: ignore[no-any-return]

        shared = self._shared
        runner = self._runner or asyncio.to_thread

        async def compute() -> T:
            # The shared store's round trips in a thread; the work where ``runner`` puts it.
            shared_key = memo_key(key) if shared is not None else ""
            kept = None
            if shared is not None:
                kept = await asyncio.to_thread(shared.get, shared_key)
            if kept is not None:
                if self._on_hit is not None:
                    self._on_hit()
                result: T = kept
            else:
                result = await runner(fn, *args, **kwargs)
                if shared is not None:
                    await asyncio.to_thread(shared.put, shared_key, result)
            if self._results.max_size:
                self._results.put(key, result)
            return result

        return await self._flights.run(key, compute)

    def __len__(self) -> int:
        return len(self._results)
