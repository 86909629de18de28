"""Page analysis in worker processes: lazy, bounded in bytes and CPU, surviving lost workers,
and leaving no process behind."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Coroutine, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from external_query_service import (
    ExternalQueryService,
    ExtractionFailed,
    SettingsError,
    fixed_clock,
)
from external_query_service.execution._analysis_pool import AnalysisPool, usable_cores
from external_query_service.models import ExternalAnswer
from external_query_service.settings import AnalysisSettings, Settings
from external_query_service.testing import Reply, World, article, hit, json_reply, searx_body
from external_query_service.text._analyse import PageAnalysis, analyse_page
from tests.support.worker_probe import loaded_modules

T = TypeVar("T")
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=timezone(timedelta(hours=8)))
QUESTION = "湛江港今年吞吐量是多少？"
SEARX = "https://searx.example.org"
ADAPTER = {"kind": "searxng", "id": "searx", "base_url": SEARX}
PAGES = 3
#: Long enough for any worker of a loaded machine to start and warm up.
READY_S = 120.0


def page_html(n: int) -> str:
    return article(
        f"湛江港吞吐量再创新高（{n}）",
        [
            f"湛江港集团第{n}次发布数据显示，今年前十个月湛江港货物吞吐量达到2.6亿吨，"
            "同比增长百分之八。"
        ],
        published="2026-11-20",
    )


@pytest.fixture
def world(https_worlds: None) -> Iterator[World]:
    with World(now=NOW) as built:
        urls = [
            built.route(f"https://port-{n}.example.cn/port", Reply(body=page_html(n)))
            for n in range(PAGES)
        ]
        hits = [hit(url, "湛江港吞吐量", "湛江港吞吐量", "2026-11-20") for url in urls]
        search = f"{SEARX}/search?" + str(httpx.QueryParams({"q": QUESTION}))
        built.route(search, json_reply(searx_body(QUESTION, hits)))
        yield built


def service(world: World, **analysis: Any) -> ExternalQueryService:
    """A service in ``world`` that keeps no analysis, so every question analyses its pages."""
    return world.service(ADAPTER, analysis=analysis, cache={"enabled": False})


def page_failures(answer: ExternalAnswer) -> list[str]:
    failures: list[str] = answer.audit.named("attempt")[0].detail["page_failures"]
    return failures


def children() -> set[int]:
    """Every live child process of this one (whichever thread started it)."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            found.update(int(pid) for pid in (task / "children").read_text().split())
        except OSError:
            continue  # the thread ended meanwhile
    return {pid for pid in found if _alive(pid)}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def run(call: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(call())


def pool(processes: int, *, page_cpu_s: float = 5.0, max_page_bytes: int = 100_000) -> AnalysisPool:
    settings = AnalysisSettings(processes=processes, page_cpu_s=page_cpu_s)
    return AnalysisPool(settings, max_page_bytes=max_page_bytes)


def analyse(analysis_pool: AnalysisPool, body: bytes) -> Coroutine[Any, Any, PageAnalysis]:
    return analysis_pool.run(
        analyse_page,
        body,
        url="https://port-0.example.cn/port",
        declared_charset="utf-8",
        content_type="text/html",
        query=QUESTION,
    )


def reap(child: int) -> int:
    """The exit code of forked ``child``; one stuck for ``READY_S`` is killed (-9), so a
    child deadlocked at fork cannot hang the suite."""
    give_up = time.monotonic() + READY_S
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > give_up:
            os.kill(child, signal.SIGKILL)
        time.sleep(0.05)


def nap(seconds: float, *, url: str) -> int:
    """A page function that holds its worker without using CPU; its worker's pid."""
    time.sleep(seconds)
    return os.getpid()


def spin(*, url: str) -> None:
    """A page function that never ends by itself, in Python code."""
    while True:
        pass


# -- settings ----------------------------------------------------------------------------------


def test_omitted_processes_means_one_worker_per_usable_core() -> None:
    analysis = pool(0)
    assert AnalysisPool(AnalysisSettings(), max_page_bytes=1).processes == usable_cores()
    assert usable_cores() == len(os.sched_getaffinity(0))
    assert analysis.processes == 0


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ({"processes": -1}, "analysis.processes"),
        ({"processes": "many"}, "analysis.processes"),
        ({"page_cpu_s": 0}, "analysis.page_cpu_s"),
        ({"page_cpu_s": -2.5}, "analysis.page_cpu_s"),
        ({"workers": 2}, "analysis.workers: unknown key"),
    ],
)
def test_bad_analysis_settings_are_one_line_errors(section: dict[str, Any], named: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_mapping({"analysis": section}, origin="test.toml")
    message = str(caught.value)
    assert message.startswith(f"test.toml: {named}")
    assert "\n" not in message


def test_the_analysis_section_reads_from_toml() -> None:
    settings = Settings.from_toml("[analysis]\nprocesses = 0\npage_cpu_s = 1.5\n")
    assert settings.analysis == AnalysisSettings(processes=0, page_cpu_s=1.5)


# -- the pool on its own -------------------------------------------------------------------------


def test_no_process_starts_before_the_first_analysis() -> None:
    before = children()
    analysis = pool(2)
    try:
        assert not analysis.started
        assert analysis.pids() == ()
        assert children() == before
    finally:
        analysis.close()


def test_the_first_page_is_analysed_in_a_thread_while_the_workers_start() -> None:
    analysis = pool(2)
    try:
        result = run(lambda: analyse(analysis, page_html(0).encode()))
        assert result.snippets
        assert analysis.started
        assert analysis.in_thread == 1
        assert analysis.in_workers == 0
    finally:
        analysis.close()


def test_a_warm_pool_computes_in_other_processes() -> None:
    analysis = pool(2)
    try:
        assert analysis.wait_ready(READY_S)
        workers = set(analysis.pids())
        assert len(workers) == 2
        assert os.getpid() not in workers

        async def both() -> list[Any]:
            return await asyncio.gather(
                analysis.run(os.getpid), analyse(analysis, page_html(1).encode())
            )

        pid, result = run(both)
        assert pid in workers
        assert isinstance(result, PageAnalysis)
        assert result.snippets
        assert analysis.in_workers == 2
        assert analysis.in_thread == 0
    finally:
        analysis.close()


def test_a_worker_is_replaced_after_its_max_pages() -> None:
    settings = AnalysisSettings(processes=1, worker_max_pages=2)
    analysis = AnalysisPool(settings, max_page_bytes=100_000)
    try:
        pids = []
        for _ in range(5):
            assert analysis.wait_ready(READY_S)
            pids.append(run(lambda: analysis.run(os.getpid)))
        assert os.getpid() not in pids  # every page in a worker, none in a thread
        assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
        assert analysis.recycled == 2
        assert pids[0] not in analysis.pids()  # the replaced worker is gone
    finally:
        analysis.close()


def test_a_worker_loads_the_text_pipeline_and_not_the_settings_or_pydantic() -> None:
    # Every worker holds what it imports: the settings and pydantic (about 18 MB) are the
    # parent's, a worker never validates anything.
    analysis = pool(1)
    try:
        assert analysis.wait_ready(READY_S)
        modules = set(run(lambda: analysis.run(loaded_modules)))
    finally:
        analysis.close()
    assert {"external_query_service.text._analyse", "trafilatura", "lxml"} <= modules
    assert "pydantic" not in modules
    assert "external_query_service.settings" not in modules


def test_workers_run_at_the_configured_niceness() -> None:
    settings = AnalysisSettings(processes=1, worker_niceness=3)
    analysis = AnalysisPool(settings, max_page_bytes=100_000)
    try:
        assert analysis.wait_ready(READY_S)
        (worker,) = analysis.pids()
        assert os.getpriority(os.PRIO_PROCESS, worker) == os.getpriority(os.PRIO_PROCESS, 0) + 3
    finally:
        analysis.close()


def test_with_no_processes_everything_runs_in_a_thread_and_nothing_starts() -> None:
    before = children()
    analysis = pool(0)
    try:
        assert analysis.wait_ready(0.1)  # nothing to wait for
        assert run(lambda: analysis.run(os.getpid)) == os.getpid()
        assert run(lambda: analyse(analysis, page_html(2).encode())).snippets
        assert analysis.pids() == ()
        assert children() == before
        assert analysis.in_thread == 2
    finally:
        analysis.close()


@pytest.mark.parametrize("processes", [0, 1])
def test_a_body_over_the_byte_cap_is_refused_before_parsing(processes: int) -> None:
    analysis = pool(processes, max_page_bytes=1000)
    try:
        analysis.wait_ready(READY_S)
        with pytest.raises(ExtractionFailed) as caught:
            run(lambda: analyse(analysis, b"<p>" + b"x" * 2000 + b"</p>"))
        assert caught.value.reason == "content_too_large"
        assert analysis.in_workers == analysis.in_thread == 0  # never handed to anyone
    finally:
        analysis.close()


def test_a_page_over_its_cpu_time_fails_and_its_worker_goes_on() -> None:
    analysis = pool(1, page_cpu_s=0.2)
    try:
        assert analysis.wait_ready(READY_S)
        (worker,) = analysis.pids()
        with pytest.raises(ExtractionFailed) as caught:
            run(lambda: analysis.run(spin, url="https://spin.example/"))
        assert caught.value.reason == "cpu_deadline"
        assert caught.value.url == "https://spin.example/"
        assert run(lambda: analysis.run(os.getpid)) == worker  # the same worker survived
    finally:
        analysis.close()


def test_a_page_stuck_in_c_code_is_stopped_by_the_hard_cpu_timer() -> None:
    analysis = pool(1, page_cpu_s=0.1)
    try:
        assert analysis.wait_ready(READY_S)
        (worker,) = analysis.pids()
        with pytest.raises(ExtractionFailed) as caught:
            # One C call that never returns to the interpreter within the deadline.
            run(lambda: analysis.run(sum, range(10**15)))
        assert caught.value.reason == "cpu_deadline"
        assert analysis.wait_ready(READY_S)  # replaced
        assert run(lambda: analysis.run(os.getpid)) not in (worker, os.getpid())
    finally:
        analysis.close()


def test_an_error_of_the_page_function_is_raised_as_itself() -> None:
    analysis = pool(1)
    try:
        assert analysis.wait_ready(READY_S)
        with pytest.raises(ValueError, match="invalid literal"):
            run(lambda: analysis.run(int, "not a number"))
        assert run(lambda: analysis.run(int, "42")) == 42
    finally:
        analysis.close()


def test_a_worker_killed_under_a_page_fails_only_that_page_and_is_replaced() -> None:
    analysis = pool(1)
    try:
        assert analysis.wait_ready(READY_S)
        (worker,) = analysis.pids()

        async def killed() -> BaseException | None:
            task = asyncio.ensure_future(analysis.run(nap, 30, url="https://slow.example/"))
            await asyncio.sleep(0.5)  # the worker holds the page now
            os.kill(worker, signal.SIGKILL)
            try:
                await task
            except ExtractionFailed as exc:
                return exc
            return None

        failure = run(killed)
        assert isinstance(failure, ExtractionFailed)
        assert failure.reason == "worker_lost"
        assert failure.url == "https://slow.example/"
        assert analysis.wait_ready(READY_S)
        (replacement,) = analysis.pids()
        assert replacement != worker
        assert run(lambda: analysis.run(nap, 0, url="https://next.example/")) == replacement
    finally:
        analysis.close()


def test_close_stops_every_worker_even_one_holding_a_page() -> None:
    before = children()
    analysis = pool(2)
    assert analysis.wait_ready(READY_S)
    workers = set(analysis.pids())
    assert workers <= children() - before

    async def close_while_busy() -> BaseException | None:
        task = asyncio.ensure_future(analysis.run(nap, 30, url="https://slow.example/"))
        await asyncio.sleep(0.3)
        await asyncio.to_thread(analysis.close)
        try:
            await task
        except ExtractionFailed as exc:
            return exc
        return None

    failure = run(close_while_busy)
    assert isinstance(failure, ExtractionFailed)
    assert failure.reason == "worker_lost"
    assert children() == before
    assert multiprocessing.active_children() == []
    assert analysis.pids() == ()
    analysis.close()  # idempotent


# -- the pool inside the service ------------------------------------------------------------------


def test_a_warmed_service_analyses_its_pages_in_the_workers(world: World) -> None:
    before = children()
    with service(world, processes=2) as svc:
        assert svc.analysis.pids() == ()  # lazy: nothing before warm_up or a page
        svc.warm_up()
        assert len(svc.analysis.pids()) == 2
        answer = svc.answer(QUESTION)
        assert answer.status == "answered"
        assert answer.attempts[0].pages_fetched == PAGES
        assert svc.analysis.in_workers == PAGES
        assert svc.analysis.in_thread == 0
    assert children() == before


def test_a_one_shot_question_does_not_wait_for_the_workers(world: World) -> None:
    before = children()
    with service(world, processes=2) as svc:
        answer = svc.answer(QUESTION)
        assert answer.status == "answered"
        assert svc.analysis.started
        assert svc.analysis.in_thread == PAGES  # the workers were still warming up
    assert children() == before


def test_processes_zero_keeps_the_service_in_one_process(world: World) -> None:
    before = children()
    with service(world, processes=0) as svc:
        svc.warm_up()
        assert svc.answer(QUESTION).status == "answered"
        assert svc.analysis.in_thread == PAGES
        assert children() == before


def test_a_page_over_its_cpu_time_is_not_a_document(world: World) -> None:
    # About half a second of CPU to analyse (the small pages take a hundredth of that).
    paragraphs = [
        f"湛江港集团发布数据显示，今年湛江港货物吞吐量增长。第{n}段。" for n in range(8000)
    ]
    heavy = world.route("https://heavy.example.cn/port", Reply(body=article("湛江港", paragraphs)))
    search = f"{SEARX}/search?" + str(httpx.QueryParams({"q": QUESTION}))
    hits = [hit(heavy, "湛江港吞吐量", "湛江港吞吐量", "2026-11-20")]
    world.route(search, json_reply(searx_body(QUESTION, hits)))
    with service(world, processes=1, page_cpu_s=0.1) as svc:
        svc.warm_up()
        (worker,) = svc.analysis.pids()
        answer = svc.answer(QUESTION)
        assert svc.analysis.pids() == (worker,)  # the worker went on
        assert svc.analysis.in_workers == 1
    assert page_failures(answer) == [f"{heavy} not_a_document:cpu_deadline"]
    assert answer.status != "answered"


def test_killed_workers_do_not_fail_the_service(world: World) -> None:
    before = children()
    with service(world, processes=2) as svc:
        svc.warm_up()
        assert svc.answer(QUESTION).status == "answered"
        for pid in svc.analysis.pids():
            os.kill(pid, signal.SIGKILL)
        again = svc.answer(QUESTION)  # pages wait for (or run beside) the replacements
        assert again.status == "answered"
        assert svc.analysis.wait_ready(READY_S)
        assert svc.answer(QUESTION).status == "answered"
    assert children() == before


def test_async_close_stops_the_workers(world: World) -> None:
    before = children()

    async def scenario() -> str:
        async with service(world, processes=1) as svc:
            await svc.awarm_up()
            assert len(svc.analysis.pids()) == 1
            answer = await svc.aanswer(QUESTION)
        return answer.status

    assert run(scenario) == "answered"
    assert children() == before


def test_a_service_without_pages_never_starts_a_worker(tmp_path: Path) -> None:
    (tmp_path / "guide.md").write_text("# Guide\n\nThe verifier checks every item.\n", "utf-8")
    before = children()
    clock = fixed_clock(NOW)
    with ExternalQueryService(Settings().with_docs(tmp_path), clock=clock) as svc:
        svc.answer("What does the verifier check?", {"query_kind": "documentation"})
        assert children() == before
        assert not svc.analysis.started


def test_workers_that_cannot_start_leave_pages_in_a_thread_and_close_stays_prompt(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("sys.executable", "/nonexistent/python3")
    analysis = pool(2)
    try:
        assert not analysis.wait_ready(READY_S)  # returns once both starts failed
        assert run(lambda: analysis.run(os.getpid)) == os.getpid()
        assert analysis.in_thread == 1
        assert "analysis worker could not start" in caplog.text
    finally:
        analysis.close()  # returns at once: the respawn back-off's wait ends with the pool
    assert analysis.pids() == ()
    assert analysis._threads  # they were started, and close() joined them
    assert not [thread for thread in analysis._threads if thread.is_alive()]


def test_a_forked_child_starts_its_own_workers_and_leaves_its_parents_alone() -> None:
    analysis = pool(1)
    try:
        assert analysis.wait_ready(READY_S)
        (worker,) = analysis.pids()
        child = os.fork()
        if child == 0:  # pragma: no cover (the child reports through its exit status)
            code = 1
            try:
                pid = asyncio.run(analysis.run(os.getpid))  # in a thread: its own pool starts
                analysis.close()
                code = 0 if pid == os.getpid() else 2
            finally:
                os._exit(code)
        assert reap(child) == 0
        assert analysis.pids() == (worker,)  # the child's close() did not stop it
        assert run(lambda: analysis.run(os.getpid)) == worker
    finally:
        analysis.close()
