"""Page analysis on every core: worker processes that decode, extract, chunk and score pages.

``AnalysisPool(settings, max_page_bytes)`` runs ``fn(*args, **kwargs)`` (a pure, picklable
page function such as ``text._analyse.analyse_page``, whose first argument is the body and
which takes ``url=``) in one of ``processes`` worker processes, or in a thread of this process
when ``processes`` is 0 or while the workers are still starting.

- Lazy: no process exists until the first ``run`` (or ``start``). Workers are separate
  interpreters started with ``subprocess`` (fork + exec, safe in a threaded process; nothing of
  the parent's ``__main__`` is run again) at a lower CPU priority (``worker_niceness``), each
  warming the text pipeline before it reports ready. Until one is ready, pages are analysed in
  a thread.
- Recycling: a worker that has analysed ``worker_max_pages`` pages takes no more; once its
  last page is back it is stopped and a fresh one started in its place, so the workers'
  memory does not grow with the service's age.
- Bounds: a body over ``max_page_bytes`` is refused before any parsing; in a worker, one page
  may use ``page_cpu_s`` seconds of CPU (``ITIMER_PROF``: ``KeyboardInterrupt``, a
  ``BaseException`` no ``except Exception`` swallows, raised in the page's code, as Ctrl-C
  would; the worker, which ignores real SIGINTs, survives). A page stuck in C
  code past twice that is stopped by a second timer (``ITIMER_VIRTUAL``, whose default action
  ends the worker). Both end as ``ExtractionFailed`` with reason ``cpu_deadline``; an
  oversized body as ``content_too_large``.
- Faults: each worker has its own pipes and its own dispatcher thread, so a worker that dies
  (killed, out of memory, a crash in C) fails only the page it was analysing
  (``ExtractionFailed`` ``worker_lost``) and is replaced; a page queued behind it goes to
  another worker, or is analysed in a thread when no warm worker is left. The other workers
  go on. A worker that cannot start at all leaves every page in a thread.
- The event loop only awaits: a dispatcher thread hands the page over (up to ``_AHEAD`` per
  worker, so a worker never waits for the parent's interpreter lock between pages), and the
  result arrives as a ``concurrent.futures.Future`` (any event loop or thread may ``run``).
- ``close()`` stops every worker (their PDF readers end with their pipes), kills this process's
  own PDF reader (``text/_pdf.py``) and joins every thread; no child process is left. A pool
  used in a forked child starts workers of its own and never touches its parent's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ExtractionFailed

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    # A worker imports this module: the settings (and pydantic, about 18 MB of a worker's
    # memory) are the parent's business only.
    from ..settings import AnalysisSettings

__all__ = [
    "CPU_DEADLINE",
    "WORKER_LOST",
    "AnalysisPool",
    "usable_cores",
    "warm_pipeline",
    "warm_scoring",
]

T = TypeVar("T")

#: The reason of a page that used up its CPU time in a worker.
CPU_DEADLINE = "cpu_deadline"
#: The reason of a page whose worker died while analysing it.
WORKER_LOST = "worker_lost"
_TOO_LARGE = "content_too_large"
#: How long a closing pool waits for a worker to exit after SIGTERM before SIGKILL.
_EXIT_GRACE_S = 2.0
#: A worker that could not start is tried again after this long (doubled up to a minute).
_RESPAWN_BACKOFF_S = 0.5
#: How often an idle dispatcher checks that its worker is still alive.
_IDLE_CHECK_S = 1.0
#: Pages handed to one worker at once: the one it analyses, and those waiting in its pipe.
_AHEAD = 2
#: The pipe buffer asked for (Linux allows up to 1 MiB unprivileged), so most pages can wait
#: in a worker's pipe; where it cannot be set, the system's (64 KiB on Linux) is used.
_PIPE_BYTES = 1024 * 1024
#: What reading a worker's pipe raises once the pipe is gone: the worker exited (EOF), or
#: the pool closed the pipe from another thread, which ``multiprocessing`` reports as an
#: ``OSError`` or, when the close lands mid-read, a ``TypeError`` (its handle became None).
_PIPE_GONE = (EOFError, OSError, TypeError)

log = logging.getLogger("external_query_service.execution")

_BOOT = (
    "import os, sys, json; os.nice(int(sys.argv[4])); sys.path[:] = json.loads(sys.argv[1]); "
    "from external_query_service.execution._analysis_pool import _worker_main; "
    "_worker_main(int(sys.argv[2]), int(sys.argv[3]))"
)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # not Linux
        return max(os.cpu_count() or 1, 1)


def warm_pipeline() -> None:
    """Pay the text pipeline's one-off costs now: trafilatura, htmldate and jusText's
    stoplists, and rjieba's dictionary, through one small Chinese page. No I/O beyond the
    installed packages' data files; cheap when already warm."""
    from ..text._analyse import analyse_page
    from ..text._extract import preload_extraction

    preload_extraction()
    page = (
        "<html lang='zh'><head><title>湛江天气预报</title></head><body><article>"
        + "<p>湛江明天多云，气温二十三到二十八摄氏度，东南风三级。</p>" * 8
        + "</article></body></html>"
    )
    # A warm-up page below some future length floor has still warmed the pipeline.
    with contextlib.suppress(ExtractionFailed):
        analyse_page(
            page.encode(),
            url="https://example.invalid/weather",
            declared_charset="utf-8",
            content_type="text/html",
            query="湛江明天天气怎么样",
        )


def warm_scoring() -> None:
    """Pay the one-off costs of the text work a process with analysis workers still does
    itself (cutting questions and snippets into terms: rjieba's dictionary, OpenCC's
    tables), and not the extraction's (trafilatura, htmldate, jusText: about 30 MB, which
    the workers hold)."""
    from ..text._score import text_terms

    text_terms("湛江明天多云，气温二十三到二十八摄氏度，東南風三級。")


def _page_url(kwargs: Mapping[str, Any]) -> str:
    return str(kwargs.get("url", ""))


def _check_size(args: tuple[Any, ...], kwargs: Mapping[str, Any], max_bytes: int) -> None:
    """Refuse a body over the byte cap before anything parses it."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, bytes | bytearray | memoryview) and len(value) > max_bytes:
            raise ExtractionFailed(_page_url(kwargs), reason=_TOO_LARGE)


# -- the worker side -------------------------------------------------------------------------


#: Raised inside a page's code when its CPU time is up: a ``BaseException``, so the
#: libraries' ``except Exception`` clauses let it through, and one nothing else raises in a
#: worker (which ignores SIGINT), so catching it means the deadline and nothing else.
_CpuDeadline = KeyboardInterrupt

_armed = False


def _on_cpu_deadline(_signum: int, _frame: FrameType | None) -> None:
    global _armed
    if _armed:
        _armed = False  # once: the hard timer covers code that swallows even this
        raise _CpuDeadline()


def _arm(cpu_s: float) -> None:
    global _armed
    _armed = True
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    signal.setitimer(signal.ITIMER_VIRTUAL, 2 * cpu_s + 1)


def _disarm() -> None:
    global _armed
    _armed = False
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.setitimer(signal.ITIMER_VIRTUAL, 0)


def _analyse(task: _Task, cpu_s: float, max_bytes: int) -> tuple[Any, ...]:
    """One page in the worker: ``("ok", result)``, ``("failed", reason)`` or
    ``("error", pickled exception or None, text)``."""
    try:
        try:
            _check_size(task.args, task.kwargs, max_bytes)
            _arm(cpu_s)
            return ("ok", task.fn(*task.args, **task.kwargs))
        finally:
            _disarm()
    except _CpuDeadline:
        return ("failed", CPU_DEADLINE)
    except ExtractionFailed as exc:
        return ("failed", exc.reason)
    except Exception as exc:
        blob: bytes | None = None
        with contextlib.suppress(Exception):
            pickled = pickle.dumps(exc)
            pickle.loads(pickled)  # some exceptions pickle but cannot be rebuilt
            blob = pickled
        return ("error", blob, f"{type(exc).__name__}: {exc}")


def _worker_main(read_fd: int, write_fd: int) -> None:
    """A worker's life: read its limits, warm up, say ready, then analyse pages until the
    parent closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGPROF, _on_cpu_deadline)
    signal.signal(signal.SIGVTALRM, signal.SIG_DFL)
    from multiprocessing.connection import Connection

    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    limits = json.loads(inbox.recv_bytes())
    cpu_s, max_bytes = float(limits["page_cpu_s"]), int(limits["max_page_bytes"])
    warm_pipeline()
    outbox.send(("ready", os.getpid()))
    while True:
        try:
            task = inbox.recv()
        except (EOFError, OSError):
            return
        try:
            reply = _analyse(task, cpu_s, max_bytes)
        except _CpuDeadline:  # landed between the page's end and the disarm
            _disarm()
            reply = ("failed", CPU_DEADLINE)
        try:
            outbox.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            outbox.send(("error", None, f"result not picklable: {exc}"))


# -- the parent side -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Task:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass
class _Job:
    task: _Task
    future: Future[Any]


_STOP = object()


def _grow_pipe(fd: int) -> int:
    """Ask for a ``_PIPE_BYTES`` buffer on pipe ``fd``; the size it has (minus the message
    header), or 0 when unknown."""
    try:
        import fcntl

        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)) - 64
    except (ImportError, AttributeError, OSError):
        return 0


class _Worker:
    """One worker process and the parent's ends of its two pipes."""

    def __init__(self, process: subprocess.Popen[bytes], inbox: Connection, outbox: Connection):
        self.process = process
        self.inbox = inbox  # what the worker reads
        self.outbox = outbox  # what the worker writes
        self.ready = False  # warm, and counted in the pool's ``ready``
        self.pages = 0  # pages it has answered
        #: What the pipe to the worker holds: a page bigger than this is never sent ahead.
        self.pipe_bytes = 0

    @classmethod
    def spawn(cls, limits: Mapping[str, float | int], niceness: int) -> _Worker:
        """Start a worker ``niceness`` steps below this process's CPU priority and hand it
        its limits (it warms up on its own)."""
        # Imported here: a process that never analyses a page in a worker does not pay for it.
        from multiprocessing.connection import Connection

        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        try:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _BOOT,
                    json.dumps([entry for entry in sys.path if entry]),
                    str(to_child_r),
                    str(from_child_w),
                    str(niceness),
                ],
                pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                close_fds=True,
            )
        except BaseException:
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
                os.close(fd)
            raise
        os.close(to_child_r)
        os.close(from_child_w)
        pipe_bytes = _grow_pipe(to_child_w)
        _grow_pipe(from_child_r)
        worker = cls(
            process,
            Connection(to_child_w, readable=False),
            Connection(from_child_r, writable=False),
        )
        worker.pipe_bytes = pipe_bytes
        worker.inbox.send_bytes(json.dumps(dict(limits)).encode())
        return worker

    def stop(self) -> None:
        """End the worker (closing its pipe, then SIGTERM, then SIGKILL) and reap it."""
        for connection in (self.inbox, self.outbox):
            with contextlib.suppress(OSError):
                connection.close()
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.terminate()
            try:
                self.process.wait(_EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def lost_reason(self) -> str:
        """Why the worker's page failed when its pipe broke: the hard CPU timer's signal
        means the page used up its CPU time."""
        try:
            code = self.process.wait(_EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            return WORKER_LOST
        return CPU_DEADLINE if code == -signal.SIGVTALRM else WORKER_LOST


class AnalysisPool:
    """Runs page analyses in worker processes (module docstring); ``processes == 0``: in a
    thread. Thread-safe; ``run`` works from any event loop."""

    def __init__(self, settings: AnalysisSettings, *, max_page_bytes: int) -> None:
        self.processes = usable_cores() if settings.processes is None else settings.processes
        self.page_cpu_s = settings.page_cpu_s
        self.max_page_bytes = max_page_bytes
        self.max_pages_per_worker = settings.worker_max_pages
        self.niceness = settings.worker_niceness
        self._closed = False
        self._reset()
        self._closing = threading.Event()  # set with _closed: ends a respawn's wait at once
        #: Pages (calls) computed in a worker and in a thread of this process, so far.
        self.in_workers = 0
        self.in_thread = 0
        #: Workers replaced after ``worker_max_pages`` pages, so far.
        self.recycled = 0

    def _reset(self) -> None:
        """No worker, no thread, nothing waiting: a new pool, or one in a forked child (whose
        parent's workers and dispatcher threads are not its own)."""
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job | object] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._workers: dict[int, _Worker] = {}  # slot → the worker serving it now
        self._ready = 0
        self._failed_starts = 0  # workers that exited (or never ran) before they were warm
        self._became_ready = threading.Condition(self._lock)

    # -- state ---------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """Whether the workers were started (they may still be warming up)."""
        return bool(self._threads)

    @property
    def ready(self) -> int:
        """How many workers are warm and taking pages."""
        return self._ready

    def pids(self) -> tuple[int, ...]:
        """The process ids of the workers alive now (warm or not)."""
        with self._lock:
            return tuple(w.process.pid for w in self._workers.values() if w.process.poll() is None)

    # -- running ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the workers in the background (no wait); nothing when ``processes == 0``,
        already started, or closed. In a process forked after the start, starts its own."""
        if self._pid != os.getpid():
            self._reset()
        with self._lock:
            if self._closed or self._threads or self.processes == 0:
                return
            for slot in range(self.processes):
                thread = threading.Thread(
                    target=self._serve, args=(slot,), name=f"analysis-worker-{slot}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def wait_ready(self, timeout: float) -> bool:
        """Start the workers and wait up to ``timeout`` seconds until every one is warm (or
        as many have failed to start); whether they are (True at once with ``processes ==
        0``: nothing to wait for)."""
        self.start()
        deadline = time.monotonic() + timeout
        with self._became_ready:
            # Workers that cannot start (no interpreter to run, say) are not waited for.
            while (
                self._ready < self.processes
                and not self._closed
                and self._failed_starts < self.processes
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._became_ready.wait(left)
            return self._ready >= self.processes

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a warm worker, or in a thread while none is (or with
        ``processes == 0``). Raises ``ExtractionFailed`` for an oversized body, a page over
        its CPU time or a worker lost under it; otherwise what ``fn`` raises."""
        _check_size(args, kwargs, self.max_page_bytes)
        if self.processes and not self._closed:
            self.start()
            if self._ready:
                future: Future[T] = Future()
                self._jobs.put(_Job(_Task(fn, args, dict(kwargs)), future))
                with self._lock:
                    self.in_workers += 1
                return await asyncio.wrap_future(future)
        with self._lock:
            self.in_thread += 1
        return await asyncio.to_thread(fn, *args, **kwargs)

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every worker, join the dispatcher threads; pages still waiting fail as
        ``worker_lost``. Idempotent. In a forked child, the parent's workers are left alone."""
        if self._pid != os.getpid():
            self._reset()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._closing.set()
            self._became_ready.notify_all()
            workers = list(self._workers.values())
            threads = list(self._threads)
        # A PDF being read for a page analysed in a thread of this process: its reader is
        # killed, so the thread is not left waiting on it (``worker_lost``).
        from ..text._pdf import close_readers

        close_readers()
        for _ in threads:
            self._jobs.put(_STOP)
        for worker in workers:
            worker.stop()  # a dispatcher waiting on it sees its pipe close
        for thread in threads:
            thread.join()
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if isinstance(job, _Job):
                _resolve(job, reason=WORKER_LOST)

    def _serve(self, slot: int) -> None:
        """One slot's dispatcher: keep a worker alive, feed it pages one at a time."""
        backoff = _RESPAWN_BACKOFF_S
        while True:
            worker = self._start_worker(slot)
            if worker is None:
                if self._closing.wait(backoff):
                    return
                backoff = min(backoff * 2, 60.0)
                continue
            backoff = _RESPAWN_BACKOFF_S
            try:
                if not self._feed(worker):
                    return
            finally:
                self._count_out(worker)
                with self._lock:
                    if self._workers.get(slot) is worker:
                        del self._workers[slot]
                worker.stop()

    def _count_out(self, worker: _Worker) -> None:
        """``worker`` takes no more pages: it no longer counts as ready."""
        with self._lock:
            if worker.ready:
                worker.ready = False
                self._ready -= 1

    def _lost(self, worker: _Worker) -> bool:
        """``worker`` is gone: count it out, and when no warm worker is left, analyse the
        pages waiting for one in this thread. False when the pool is closing."""
        self._count_out(worker)
        alone = self._ready == 0
        if self._closed:
            return False
        while alone:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if not isinstance(job, _Job):
                self._jobs.put(job)  # a stop for some dispatcher: leave it
                return False
            if not job.future.cancelled():
                try:
                    result = job.task.fn(*job.task.args, **job.task.kwargs)
                except Exception as exc:
                    _resolve(job, exception=exc)
                else:
                    _resolve(job, result=result)
        return True

    def _start_worker(self, slot: int) -> _Worker | None:
        """A warm worker in ``slot``, or None when it could not start (or the pool closed)."""
        with self._lock:
            if self._closed:
                return None
            try:
                worker = _Worker.spawn(
                    {"page_cpu_s": self.page_cpu_s, "max_page_bytes": self.max_page_bytes},
                    self.niceness,
                )
            except Exception as exc:  # no interpreter to start (an embedded Python), no fds
                log.warning("analysis worker could not start: %s", exc)
                self._failed_starts += 1
                self._became_ready.notify_all()
                return None
            self._workers[slot] = worker
        try:
            hello = worker.outbox.recv()
        except _PIPE_GONE:
            hello = None
        with self._lock:
            if hello is None or hello[0] != "ready" or self._closed:
                if not self._closed:
                    log.warning("analysis worker exited while warming up")
                    self._failed_starts += 1
                    self._became_ready.notify_all()
                if self._workers.get(slot) is worker:
                    del self._workers[slot]
                worker.stop()
                return None
            worker.ready = True
            self._ready += 1
            self._became_ready.notify_all()
        return worker

    def _feed(self, worker: _Worker) -> bool:
        """Hand pages to ``worker`` until it is lost (False: stop for good, the pool closed;
        True: replace the worker).

        Up to ``_AHEAD`` pages are in the worker's pipe at once, so it starts the next page as
        soon as it is done with one instead of waiting for this thread (which needs the
        interpreter lock the event loop is using) to collect the result and hand over another.
        A page is sent ahead only when it fits in the pipe's buffer: the worker may be blocked
        writing a large result meanwhile, and both sides must never wait on a full pipe.

        A worker given its ``worker_max_pages`` pages takes no more; when the last of them is
        back, True: it is replaced."""
        outstanding: deque[_Job] = deque()
        limit = self.max_pages_per_worker
        while True:
            if limit and worker.pages >= limit and not outstanding:
                self._count_out(worker)
                with self._lock:
                    self.recycled += 1
                return True
            while len(outstanding) < _AHEAD and not (
                limit and worker.pages + len(outstanding) >= limit
            ):
                try:
                    job = self._jobs.get(timeout=_IDLE_CHECK_S) if not outstanding else None
                except queue.Empty:
                    if worker.process.poll() is not None:
                        return self._lost(worker)  # died while idle: replace it
                    continue
                if job is None:
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                if not isinstance(job, _Job):
                    self._fail(outstanding, WORKER_LOST)  # the pool is closing
                    return False
                if job.future.cancelled():
                    continue  # its caller stopped waiting before it was sent
                try:
                    data = pickle.dumps(job.task)
                except Exception as exc:  # the task does not pickle: the caller's bug
                    _resolve(job, exception=exc)
                    continue
                if outstanding and len(data) > worker.pipe_bytes:
                    self._jobs.put(job)  # too big to wait in the pipe: later, or elsewhere
                    break
                if worker.process.poll() is not None:
                    # Died while idle: the page never reached it. Another worker takes it;
                    # with none left, what waits is analysed here rather than after a respawn.
                    self._jobs.put(job)
                    self._requeue(outstanding)
                    return self._lost(worker)
                try:
                    worker.inbox.send_bytes(data)
                except OSError:
                    self._jobs.put(job)
                    break  # the worker is gone: the receive below says so
                outstanding.append(job)
            if not outstanding:
                continue
            try:
                reply = worker.outbox.recv()
            except _PIPE_GONE:
                # The first page sent is the one it was analysing; the others never started.
                reason = WORKER_LOST if self._closed else worker.lost_reason()
                self._count_out(worker)  # before anyone hears of it: no new page for it
                _resolve(outstanding.popleft(), reason=reason)
                if self._closed:
                    self._fail(outstanding, WORKER_LOST)
                    return False
                self._requeue(outstanding)
                return self._lost(worker)
            worker.pages += 1
            _settle(outstanding.popleft(), reply)

    def _requeue(self, jobs: deque[_Job]) -> None:
        while jobs:
            self._jobs.put(jobs.popleft())

    @staticmethod
    def _fail(jobs: deque[_Job], reason: str) -> None:
        while jobs:
            _resolve(jobs.popleft(), reason=reason)


def _resolve(
    job: _Job,
    *,
    result: Any = None,
    exception: BaseException | None = None,
    reason: str | None = None,
) -> None:
    """Settle ``job``'s future (a failure ``reason`` is an ``ExtractionFailed``); nothing when
    its caller cancelled it meanwhile."""
    if reason is not None:
        exception = ExtractionFailed(_page_url(job.task.kwargs), reason=reason)
    try:
        if exception is not None:
            job.future.set_exception(exception)
        else:
            job.future.set_result(result)
    except InvalidStateError:
        pass  # cancelled by its caller


def _settle(job: _Job, reply: tuple[Any, ...]) -> None:
    """Resolve ``job``'s future from a worker's reply."""
    kind = reply[0]
    if kind == "ok":
        _resolve(job, result=reply[1])
    elif kind == "failed":
        _resolve(job, reason=reply[1])
    else:
        blob, text = reply[1], reply[2]
        error = pickle.loads(blob) if blob is not None else None
        _resolve(job, exception=error if isinstance(error, BaseException) else RuntimeError(text))
