"""``warm_up`` pays the first question's one-off costs offline, and the service still answers."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from trafilatura import external as trafilatura_external

from external_query_service import ExternalQueryService, ServiceClosed, Settings
from external_query_service.text import _tokens as tokens

#: Pages analysed in a thread: warm_up waits for the analysis workers it starts, and all but
#: the test about those workers leave them out (each is an interpreter warming up, ~1 s CPU).
IN_THREAD = Settings.from_mapping({"analysis": {"processes": 0}})


def docs_folder(tmp_path: Path) -> Path:
    (tmp_path / "guide.md").write_text(
        "# Guide\n\nThe verifier checks origin, target and time range of every evidence item "
        "before anything is answered.\n",
        encoding="utf-8",
    )
    return tmp_path


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every attempt to resolve a name or open a connection is recorded and refused."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network used during warm-up")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


def test_warm_up_loads_the_text_pipeline_without_touching_the_network(
    tmp_path: Path, no_network: list[object]
) -> None:
    with ExternalQueryService(IN_THREAD.with_docs(docs_folder(tmp_path))) as service:
        service.warm_up()
        service.warm_up()  # a second call is harmless
    assert no_network == []
    assert trafilatura_external.JT_STOPLIST
    assert tokens._jieba.cache_info().currsize == 1


def test_a_question_after_warm_up_is_still_answered(tmp_path: Path) -> None:
    with ExternalQueryService(IN_THREAD.with_docs(docs_folder(tmp_path))) as service:
        service.warm_up()
        answer = service.answer("What does the verifier check?", {"query_kind": "documentation"})
    assert answer.status == "answered"


def test_awarm_up_warms_from_an_event_loop_and_the_async_answer_follows(tmp_path: Path) -> None:
    async def scenario() -> str:
        async with ExternalQueryService(IN_THREAD.with_docs(docs_folder(tmp_path))) as service:
            await service.awarm_up()
            answer = await service.aanswer(
                "What does the verifier check?", {"query_kind": "documentation"}
            )
        return answer.status

    assert asyncio.run(scenario()) == "answered"


def test_warm_up_after_close_is_refused(tmp_path: Path) -> None:
    service = ExternalQueryService(IN_THREAD.with_docs(docs_folder(tmp_path)))
    service.close()
    with pytest.raises(ServiceClosed):
        service.warm_up()


def test_warm_up_from_inside_a_running_loop_still_works(tmp_path: Path) -> None:
    async def scenario() -> str:
        async with ExternalQueryService(IN_THREAD.with_docs(docs_folder(tmp_path))) as service:
            service.warm_up()  # blocking, but allowed: nothing in it needs this thread's loop
            answer = await service.aanswer(
                "What does the verifier check?", {"query_kind": "documentation"}
            )
        return answer.status

    assert asyncio.run(scenario()) == "answered"


def test_warm_up_builds_the_synchronous_loops_page_client_and_workers(tmp_path: Path) -> None:
    settings = Settings.from_mapping({"analysis": {"processes": 1}})
    with ExternalQueryService(settings.with_docs(docs_folder(tmp_path))) as service:
        assert not service._portal.running
        service.warm_up()
        assert service._portal.running  # the loop the synchronous calls use
        assert len(service._http.fetcher._loops._items) == 1
        assert service.analysis.ready == 1  # warm_up waited for its worker
        assert len(service.analysis.pids()) == 1
        answer = service.answer("What does the verifier check?", {"query_kind": "documentation"})
    assert answer.status == "answered"


def test_with_analysis_workers_warm_up_leaves_the_extraction_to_them() -> None:
    # In a fresh interpreter: this one has long imported everything. The workers hold the
    # extraction (about 30 MB); the service cuts questions and snippets, and warms that.
    script = (
        "import sys\n"
        "from external_query_service import ExternalQueryService, Settings\n"
        "from external_query_service.text import _tokens as tokens\n"
        "settings = Settings.from_mapping({'analysis': {'processes': 1}})\n"
        "with ExternalQueryService(settings) as service:\n"
        "    service.warm_up()\n"
        "    ready = service.analysis.ready\n"
        "print(ready, tokens._jieba.cache_info().currsize, 'trafilatura' in sys.modules,\n"
        "      'anyio._backends._asyncio' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    # anyio's asyncio backend is imported before the first request asks for it.
    assert done.stdout.split() == ["1", "1", "False", "True"]
