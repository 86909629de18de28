"""Delegation overhead: what one turn of the loop costs besides the model, and how big the
prompt grows with the captures.

A loopback docs site has an index linking to N pages; the last page holds the marker. A
scripted in-process model (no HTTP, so its latency is zero) follows the links in order,
records the marked passage and saves, writing certain log-probabilities so every choice is
gated. The same site walked without a model (``collect``: the same N + 1 fetches) is the
baseline. Printed: wall time per delegated turn and per walked page (both fetch a loopback
page), and the prompt's characters and offered ids at the first and the last turn.

    python bench/delegate_loop.py [--pages 12] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from external_query_service.llm import ChatMessage, Completion, TokenLogprob
from external_query_service.settings import NetworkSettings
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.toolkit import EvidenceTask, ToolkitSession, load_task

MARKER = "需要 Python 3.11"


def site(server: LoopbackServer, pages: int) -> None:
    links = "".join(f'<a href="/p{n}">第{n}页</a> ' for n in range(pages))
    server.route("/", Reply(body=f"<html><body>{links}</body></html>"), host="docs.test")
    for n in range(pages):
        text = MARKER if n == pages - 1 else "没有要求"
        body = "".join(
            f"<p>第{n}页第{i}段：本页说明安装步骤与配置方法，{text}，请按顺序阅读。</p>"
            for i in range(6)
        )
        html = f"<html><body><main><article><h1>第{n}页</h1>{body}</article></main></body></html>"
        server.route(f"/p{n}", Reply(body=html), host="docs.test")


def _enum_values(schema: Any) -> set[str]:
    """The option ids the reply schema's enums list (the state_ref's aside)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        if "enum" in schema:
            found |= {value for value in schema["enum"] if isinstance(value, str)}
        for key, value in schema.items():
            if key != "state_ref":
                found |= _enum_values(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= _enum_values(value)
    return found


class ScriptedModel:
    """Stands in for ``ChatCompletionsClient``: reads the offer, answers at once."""

    model = "scripted"

    def __init__(self) -> None:
        self.prompts: list[tuple[int, int]] = []  # (characters, offered ids)

    def credential_values(self) -> tuple[str, ...]:
        return ()

    async def complete(
        self, messages: Sequence[ChatMessage], output: type[Any], **options: Any
    ) -> Completion[Any]:
        shown = json.loads(messages[-1].content)
        offers = {item["tool"]: item for item in shown["tools_on_offer"]}
        self.prompts.append((len(messages[-1].content), len(_enum_values(options["schema"]))))
        tool, ids = self._choose(shown, offers)
        names = [p["name"] for p in offers[tool]["parameters"]] if tool in offers else []
        step: dict[str, Any] = {"tool": tool} | dict(zip(names, ids, strict=True))
        content = json.dumps({"note": "", "state_ref": shown["state_ref"], "step": step})
        tokens = [TokenLogprob(token=ch, logprob=0.0, top=((ch, 0.0),)) for ch in content]
        return Completion(
            value=output.model_validate_json(content),
            content=content,
            mode="json_schema",
            model=self.model,
            logprobs=tuple(tokens),
        )

    @staticmethod
    def _choose(shown: dict[str, Any], offers: dict[str, Any]) -> tuple[str | None, list[str]]:
        """Open, then record when a marked passage is on offer, else follow the next link,
        then save."""

        def first(tool: str, parameter: int = 0) -> str:
            option: str = offers[tool]["parameters"][parameter]["options"][0]["id"]
            return option

        if "record_evidence" in offers:
            category = first("record_evidence")
            by_parent = offers["record_evidence"]["parameters"][1]["options_by_parent"]
            return "record_evidence", [category, by_parent[category][0]["id"]]
        if "web.open_link" in offers:  # the entry first, then the links in order
            return "web.open_link", [first("web.open_link")]
        return "save_report", []


def build_task(server: LoopbackServer, folder: str, pages: int) -> EvidenceTask:
    task_file = Path(folder) / "task.toml"
    task_file.write_text(
        'name = "bench"\nsource = "web"\nreports_dir = "reports"\n'
        f"[budget]\nmax_pages = {pages + 1}\nmax_depth = 1\n"
        f"[delegation]\nmax_steps = {pages + 5}\n",
        encoding="utf-8",
    )
    spec, task_dir = load_task(task_file)
    origin = f"http://docs.test:{server.port}"
    return EvidenceTask(
        spec,
        {
            "url": origin + "/",
            "allowed_origins": [origin],
            "markers": {"requirements": MARKER},
            "output": "out.json",
        },
        task_dir=task_dir,
        network=NetworkSettings(
            allowed_networks=("127.0.0.1/32",),  # type: ignore[arg-type]
            resolve={"docs.test": "127.0.0.1"},
        ),
    )


def delegated(pages: int) -> tuple[float, int, ScriptedModel, str]:
    """Seconds, turns, the model (with its prompt sizes) and the status of one run."""
    with LoopbackServer() as server, tempfile.TemporaryDirectory() as folder:
        site(server, pages)
        model = ScriptedModel()
        session = ToolkitSession(build_task(server, folder, pages), model=model)  # type: ignore[arg-type]

        async def go() -> Any:
            try:
                return await session.delegate("Quote the Python requirement.")
            finally:
                await session.aclose()

        started = time.perf_counter()
        result = asyncio.run(go())
        return time.perf_counter() - started, result.cost.model_calls, model, result.status


def walked(pages: int) -> tuple[float, int]:
    """Seconds and pages of the model-free walk over the same site."""
    with LoopbackServer() as server, tempfile.TemporaryDirectory() as folder:
        site(server, pages)
        task = build_task(server, folder, pages)

        async def go() -> Any:
            try:
                return await task.collect()
            finally:
                await task.aclose()

        started = time.perf_counter()
        summary = asyncio.run(go())
        return time.perf_counter() - started, summary.pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=12)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    per_turn: list[float] = []
    per_page: list[float] = []
    for _ in range(args.runs):
        wall, turns, model, status = delegated(args.pages)
        per_turn.append(wall / turns * 1000)
        walk_wall, walk_pages = walked(args.pages)
        per_page.append(walk_wall / walk_pages * 1000)
    first, last = model.prompts[0], model.prompts[-1]
    print(f"pages: {args.pages}  delegated turns: {turns}  status: {status}")
    print(
        f"wall per delegated turn: median {statistics.median(per_turn):.1f} ms; "
        f"per walked page: median {statistics.median(per_page):.1f} ms ({args.runs} runs)"
    )
    print(
        f"prompt: first turn {first[0]} chars, {first[1]} ids; last turn {last[0]} chars, "
        f"{last[1]} ids; largest {max(p[0] for p in model.prompts)} chars"
    )


if __name__ == "__main__":
    main()
