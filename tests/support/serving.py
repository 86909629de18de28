"""What the HTTP service tests share (no server package imported here, so a module that
needs only these runs without the ``[server]`` extra)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

__all__ = ["CLI", "DOCS", "DOCS_QUESTION", "served_workers", "write_docs"]

#: The command line of ``external-query`` run from this interpreter.
CLI = (sys.executable, "-m", "external_query_service.cli")

DOCS_QUESTION = "What does the verifier check?"
DOCS = {"query_kind": "documentation"}


def write_docs(folder: Path) -> Path:
    """A docs folder with one page long enough to need several bounded reads."""
    folder.mkdir(parents=True, exist_ok=True)
    paragraphs = "\n\n".join(
        f"Paragraph {n}: the verifier checks origin, target, time range and the number of "
        "independent sources before anything is answered; rejected evidence is never quoted."
        for n in range(30)
    )
    (folder / "verifier.md").write_text(f"# Verifier\n\n{paragraphs}\n", encoding="utf-8")
    return folder


@contextlib.contextmanager
def served_workers(
    command: Sequence[str], env: Mapping[str, str], workers: int = 2
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``serve --workers N`` (``command``) in a process group of its own, once every worker
    has started: yields the process and its URL. On the way out the whole group is stopped,
    since a worker left behind would hold the stderr pipe open and its reader would never
    see the end."""
    process = subprocess.Popen(
        list(command),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stderr is not None
    stderr = process.stderr
    log: list[str] = []
    started = threading.Event()
    base: list[str] = []

    def read() -> None:
        for line in stderr:
            log.append(line)
            found = re.search(r"Serving on (http://\S+)", line)
            if found:
                base.append(found.group(1))
            if sum("Application startup complete" in item for item in log) >= workers:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert started.wait(120), "".join(log)
        yield process, base[0]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
        reader.join(30)
        if not reader.is_alive():  # closing while it still reads would wait on its lock
            stderr.close()
