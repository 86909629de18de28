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
    from .cases import (
        Case,
        CaseResult,
        Expectation,
        Mismatch,
        check_answer,
        find_case_files,
        load_cases,
        run_case,
    )
    from .compare import comparable_answer
    from .content import article, hit, searx_body
    from .evaluation import EvalReport, Scores, evaluate
    from .faults import FAULTS, Fault, fault_reply
    from .recorder import Recording, RecordingRuntime, RecordResult, record_world
    from .report import render_html, render_json, render_table, write_reports
    from .server import ANY_HOST, LoopbackServer, RecordedRequest, Reply, json_reply
    from .world import BRAVE_URL, FORECAST, FX, GEO, SEARX, TAVILY_URL, World, open_world
    from .world_files import WorldManifest, WorldSpec, load_world, write_world

_EXPORTS = {
    "ANY_HOST": ".server",
    "BRAVE_URL": ".world",
    "Case": ".cases",
    "CaseResult": ".cases",
    "EvalReport": ".evaluation",
    "Expectation": ".cases",
    "FAULTS": ".faults",
    "FORECAST": ".world",
    "FX": ".world",
    "Fault": ".faults",
    "GEO": ".world",
    "LoopbackServer": ".server",
    "Mismatch": ".cases",
    "RecordResult": ".recorder",
    "RecordedRequest": ".server",
    "Recording": ".recorder",
    "RecordingRuntime": ".recorder",
    "Reply": ".server",
    "SEARX": ".world",
    "Scores": ".evaluation",
    "TAVILY_URL": ".world",
    "World": ".world",
    "WorldManifest": ".world_files",
    "WorldSpec": ".world_files",
    "article": ".content",
    "check_answer": ".cases",
    "comparable_answer": ".compare",
    "evaluate": ".evaluation",
    "fault_reply": ".faults",
    "find_case_files": ".cases",
    "hit": ".content",
    "json_reply": ".server",
    "load_cases": ".cases",
    "load_world": ".world_files",
    "open_world": ".world",
    "record_world": ".recorder",
    "render_html": ".report",
    "render_json": ".report",
    "render_table": ".report",
    "run_case": ".cases",
    "searx_body": ".content",
    "write_reports": ".report",
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
