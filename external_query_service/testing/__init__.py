"""Test support that hosts can use too: record a world once, replay it forever.

- ``World`` / ``open_world``: search engines, fact APIs and pages served on 127.0.0.1
  (http and https) with per-route latency and faults; ``world.settings()`` points a
  service there with the network guard on, URLs unchanged (``connect_to``).
- ``RecordingRuntime`` / ``record_world``: run the chain against real providers and write
  what they answered as a world directory (``world_files.py`` holds the format).
- ``Case`` / ``load_cases`` / ``run_case``: regression cases in TOML; ``evaluate`` scores a
  suite and ``report`` renders it; ``plugin`` runs cases under pytest.
- ``LoopbackServer``: the underlying server, routing by Host header and path.

See docs/architecture/testing.md.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._cases import (
        Case,
        CaseResult,
        Expectation,
        Mismatch,
        check_answer,
        find_case_files,
        load_cases,
        run_case,
    )
    from ._compare import comparable_answer
    from ._evaluation import EvalReport, Scores, evaluate
    from ._faults import FAULTS, Fault, fault_reply
    from ._recorder import Recording, RecordingRuntime, RecordResult, record_world
    from ._report import render_html, render_json, render_table, write_reports
    from .content import article, hit, searx_body
    from .server import ANY_HOST, LoopbackServer, RecordedRequest, Reply, json_reply
    from .world import BRAVE_URL, FORECAST, FX, GEO, SEARX, TAVILY_URL, World, open_world
    from .world_files import WorldManifest, WorldSpec, load_world, write_world

_EXPORTS = {
    "ANY_HOST": ".server",
    "BRAVE_URL": ".world",
    "Case": "._cases",
    "CaseResult": "._cases",
    "EvalReport": "._evaluation",
    "Expectation": "._cases",
    "FAULTS": "._faults",
    "FORECAST": ".world",
    "FX": ".world",
    "Fault": "._faults",
    "GEO": ".world",
    "LoopbackServer": ".server",
    "Mismatch": "._cases",
    "RecordResult": "._recorder",
    "RecordedRequest": ".server",
    "Recording": "._recorder",
    "RecordingRuntime": "._recorder",
    "Reply": ".server",
    "SEARX": ".world",
    "Scores": "._evaluation",
    "TAVILY_URL": ".world",
    "World": ".world",
    "WorldManifest": ".world_files",
    "WorldSpec": ".world_files",
    "article": ".content",
    "check_answer": "._cases",
    "comparable_answer": "._compare",
    "evaluate": "._evaluation",
    "fault_reply": "._faults",
    "find_case_files": "._cases",
    "hit": ".content",
    "json_reply": ".server",
    "load_cases": "._cases",
    "load_world": ".world_files",
    "open_world": ".world",
    "record_world": "._recorder",
    "render_html": "._report",
    "render_json": "._report",
    "render_table": "._report",
    "run_case": "._cases",
    "searx_body": ".content",
    "write_reports": "._report",
    "write_world": ".world_files",
}

__all__ = [
    "ANY_HOST",
    "BRAVE_URL",
    "FAULTS",
    "FORECAST",
    "FX",
    "GEO",
    "SEARX",
    "TAVILY_URL",
    "Case",
    "CaseResult",
    "EvalReport",
    "Expectation",
    "Fault",
    "LoopbackServer",
    "Mismatch",
    "RecordResult",
    "RecordedRequest",
    "Recording",
    "RecordingRuntime",
    "Reply",
    "Scores",
    "World",
    "WorldManifest",
    "WorldSpec",
    "article",
    "check_answer",
    "comparable_answer",
    "evaluate",
    "fault_reply",
    "find_case_files",
    "hit",
    "json_reply",
    "load_cases",
    "load_world",
    "open_world",
    "record_world",
    "render_html",
    "render_json",
    "render_table",
    "run_case",
    "searx_body",
    "write_reports",
    "write_world",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
