"""A port-statistics page and its analysis, and what building an object allocates
(tracemalloc): the memory accounting tests' material, shared with the fresh process one of
them measures in."""

from __future__ import annotations

import gc
import pickle
import sys
import tracemalloc
from collections.abc import Callable

from external_query_service._memo import held_bytes
from external_query_service.text._analyse import PageAnalysis, analyse_page
from external_query_service.text._score import text_terms


def page_html_bytes(n: int) -> bytes:
    paragraphs = "".join(
        f"<p>第{n}号港口第{k}段：集装箱吞吐量同比增长百分之{k + n}，码头作业按计划推进。</p>"
        for k in range(200)
    )
    return f"<html><body><article>{paragraphs}</article></body></html>".encode()


def port_analysis(n: int) -> PageAnalysis:
    return analyse_page(
        page_html_bytes(n),
        url=f"http://port-{n}.example/news",
        declared_charset="utf-8",
        content_type="text/html",
        query="港口集装箱吞吐量增长多少",
    )


def allocated_by(build: Callable[[], object]) -> tuple[object, int]:
    """What ``build()`` returns and the bytes still allocated for it (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        built = build()
        gc.collect()
        return built, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def page_analysis_measured() -> dict[str, int]:
    """The measurement below, made where no other test has filled the process's kept cuts:
    their bound would evict older cuts while the measured one is kept, and the bytes freed
    then would be taken off what the analysis allocated."""
    data = pickle.dumps(port_analysis(1))
    # Unpickling keeps the snippets' cut for this process: once before measuring, so the
    # measured one only replaces it.
    pickle.loads(data)
    analysis, allocated = allocated_by(lambda: pickle.loads(data))
    assert isinstance(analysis, PageAnalysis)
    # What was allocated is the analysis and the snippets' cuts it left for this process
    # (which share their term strings with it).
    cuts = [text_terms(item.chunk.text) for item in analysis.snippets]
    return {
        "allocated": allocated,
        "cuts": len(cuts),
        "with_cuts": held_bytes([analysis, *cuts]),
        "walked": held_bytes(analysis),
        "own": analysis.held_bytes(),
        "text": sys.getsizeof(analysis.text),
    }
