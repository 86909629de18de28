"""What the delegation tests share: a scripted model that walks the offered tools.

The delegation loop shows the model the tools on offer as JSON in its last message; a
scripted step (``pick``) reads that view and answers with the ids whose labels it names,
with log-probabilities so the confidence gate lets it through.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from external_query_service.llm import ChatCompletionsClient
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.toolkit import ToolkitSession
from external_query_service.toolkit._delegate import DelegationResult
from tests.support.llm_chat import ChatServer, completion, logprob_tokens
from tests.support.toolkit_tasks import make_task, write

#: The environment variable the model's API key is read from, and the key: no output may
#: hold it.
KEY_ENV = "EQS_DELEGATE_TEST_KEY"
SECRET = "sk-delegate-71c9e04b2a5d4f8e9b3c6a1d0e2f4b57"


def view(body: dict[str, Any]) -> dict[str, Any]:
    """What the loop showed the model in this request."""
    shown: dict[str, Any] = json.loads(body["messages"][-1]["content"])
    return shown


def chosen_ids(shown: dict[str, Any], tool: str, labels: dict[str, str]) -> list[str]:
    """Option ids for ``tool`` whose labels contain ``labels[parameter]`` (parents first)."""
    offer = next(item for item in shown["tools_on_offer"] if item["tool"] == tool)
    ids: list[str] = []
    for parameter in offer["parameters"]:
        pool = parameter.get("options") or parameter["options_by_parent"][ids[-1]]
        wanted = labels.get(parameter["name"], "")
        ids.append(next(option["id"] for option in pool if wanted in option["label"]))
    return ids


def reply_content(
    shown: dict[str, Any],
    tool: str | None,
    options: list[str],
    *,
    note: str = "next step",
    state_ref: str | None = None,
) -> str:
    """A reply as the schema asks: ``step`` holds the tool and one id per parameter, by
    the offered parameter's name (``tool`` None: stop)."""
    step: dict[str, Any] = {"tool": tool}
    offer = next((item for item in shown["tools_on_offer"] if item["tool"] == tool), None)
    names = [p["name"] for p in offer["parameters"]] if offer else ["option"] * len(options)
    step.update(zip(names, options, strict=False))
    return json.dumps({"note": note, "state_ref": state_ref or shown["state_ref"], "step": step})


def step_reply(
    shown: dict[str, Any],
    tool: str | None,
    options: list[str],
    *,
    done: bool = False,
    state_ref: str | None = None,
    weights: dict[str, float] | None = None,
) -> Reply:
    """The model's reply; with ``weights`` (probability of the chosen tool and ids), the
    other offered values share the rest of each choice's probability."""
    content = reply_content(shown, None if done else tool, options, state_ref=state_ref)
    if weights is None:
        return completion(content)
    tools = [item["tool"] for item in shown["tools_on_offer"]]
    offer = next(item for item in shown["tools_on_offer"] if item["tool"] == tool)
    tables: dict[str, dict[str, float]] = {}
    if tool is not None:
        tables[tool] = spread(tool, tools, weights.get(tool, 0.97))
    for parameter, option in zip(offer["parameters"], options, strict=True):
        pool = parameter.get("options") or next(
            children
            for children in parameter["options_by_parent"].values()
            if option in [o["id"] for o in children]
        )
        tables[option] = spread(option, [o["id"] for o in pool], weights.get(option, 0.97))
    return completion(content, logprobs=logprob_tokens(content, tables))


def spread(chosen: str, offered: list[str], probability: float) -> dict[str, float]:
    """Log-probability table of one choice: ``chosen`` at ``probability``, the rest shared."""
    others = [value for value in offered if value != chosen]
    rest = (1.0 - probability) / max(1, len(others)) if others else 0.0
    return {chosen: probability} | {value: rest for value in others if rest > 0}


#: One scripted model reply, made from the request the loop sent.
Chooser = Callable[[dict[str, Any]], Reply]


def pick(tool: str, **labels: str) -> Chooser:
    """A scripted step: choose ``tool`` with options by label, confidently (log-probs)."""

    def reply(body: dict[str, Any]) -> Reply:
        shown = view(body)
        ids = chosen_ids(shown, tool, labels)
        return step_reply(shown, tool, ids, weights={})

    return reply


#: The six confident steps that complete the web task: open the entry, the guide and the
#: licence, record both categories, save the report.
WEB_SCRIPT = (
    pick("web.open_link", link="(entry)"),
    pick("web.open_link", link="/guide"),
    pick("web.open_link", link="/licence"),
    pick("record_evidence", category="requirements"),
    pick("record_evidence", category="licence"),
    pick("save_report"),
)


def web_session(
    folder: Path, docs: LoopbackServer, chat: ChatServer, **overrides: Any
) -> ToolkitSession:
    """A session on the web task over ``docs``, delegating to the scripted ``chat`` model."""
    return ToolkitSession(
        make_task(folder, docs, **overrides), model=ChatCompletionsClient(chat.settings())
    )


def delegate(
    session: ToolkitSession, goal: str = "Quote the requirements and the licence.", **options: Any
) -> DelegationResult:
    """``session.delegate`` run to its end in a fresh event loop, the session closed after."""

    async def run() -> DelegationResult:
        try:
            return await session.delegate(goal, **options)
        finally:
            await session.aclose()

    return asyncio.run(run())


def archived(path: Path) -> list[dict[str, Any]]:
    """The lines of a delegation archive (JSON Lines)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def model_config(folder: Path, chat: ChatServer, *, key_env: str | None = None) -> Path:
    """``folder/settings.toml``: the loopback network and ``chat`` as the model (no retries;
    its key read from ``key_env`` when given)."""
    key = f'api_key_env = "{key_env}"\n' if key_env else ""
    return write(
        folder / "settings.toml",
        '[network]\nallowed_networks = ["127.0.0.1/32"]\ntimeout_s = 5.0\n'
        '[network.resolve]\n"docs.test" = "127.0.0.1"\n'
        f'[llm]\nbase_url = "{chat.base_url}"\nmodel = "fake-model"\nmax_retries = 0\n{key}',
    )
