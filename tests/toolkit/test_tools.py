"""Tools a caller adds: a toolkit (two tools, an explore parameter with a dependent child)
observed, offered, gated and run by operate and by delegation; trusted generators feed a
candidate pool with checked text only. One object per tool: a ``ToolDefinition`` binds its
contract, runner and candidates to a source; the built-in names and their older aliases are
read off the definitions, and match what tasks actually install."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from external_query_service.errors import TaskDefinitionError
from external_query_service.llm import ChatCompletionsClient
from external_query_service.testing import Reply
from external_query_service.toolkit import (
    CandidateValue,
    EvidenceTask,
    GeneratorContext,
    Parameter,
    Tool,
    ToolDefinition,
    Toolkit,
    ToolkitSession,
    TrustedGenerator,
    load_task,
)
from external_query_service.toolkit._kits import ALIASES, BUILTIN_TOOLS, TOOL_NAMES
from external_query_service.toolkit._tools import ToolRegistry
from tests.support.delegation import chosen_ids, delegate, pick, step_reply, view
from tests.support.llm_chat import ChatServer
from tests.support.toolkit_tasks import web_inputs_static, web_task, write

MARKER = "means a signed credential"
SENSES = {
    "token": {
        "auth": f"In this project a token {MARKER} checked by verify_token.",
        "parsing": "A token is also one lexical unit of the configuration parser.",
    },
    "session": {"web": "A session is one client's sequence of operations."},
}


class Glossary:
    """A caller's toolkit: look a term's senses up, capture one sense as evidence."""

    name = "glossary"

    def __init__(self) -> None:
        self.captured = 0
        self.observed = 0

    def observe(self) -> Mapping[str, JsonValue]:
        self.observed += 1
        return {"terms": len(SENSES), "captured": self.captured}

    def install(self, task: ToolRegistry) -> None:
        store = task.store

        def terms(_parent: str | None) -> list[CandidateValue]:
            return [CandidateValue(term, f"term {term}") for term in SENSES]

        def senses(term: str | None) -> list[CandidateValue]:
            return [
                CandidateValue(f"{term}/{s}", f"{term}: {s}") for s in SENSES.get(term or "", {})
            ]

        def lookup(values: Mapping[str, str]) -> JsonValue:
            return {"term": values["term"], "senses": list(SENSES[values["term"]])}

        def capture(values: Mapping[str, str]) -> JsonValue:
            term, sense = values["sense"].split("/", 1)
            ref = store.put(SENSES[term][sense], f"glossary:{term}/{sense}")
            self.captured += 1
            return {"ref": ref, "term": term, "sense": sense}

        task.add_tool(
            Tool(
                "glossary.lookup",
                "List the senses of a glossary term.",
                lookup,
                (Parameter("term", "a glossary term"),),
                {"term": terms},
            )
        )
        task.add_tool(
            Tool(
                "glossary.capture",
                "Capture one sense of a term as evidence.",
                capture,
                (
                    Parameter("term", "a term worth a look", selection="explore"),
                    Parameter("sense", "one of its senses", depends_on="term"),
                ),
                {"term": terms, "sense": senses},
                effect="capture",
            )
        )


def glossary_task(folder: Path, *toolkits: Toolkit) -> EvidenceTask:
    write(folder / "corpus" / "README.md", "# Notes\n\nNothing about tokens here.\n")
    spec, task_dir = load_task(
        write(folder / "gl.toml", 'name = "gl"\nsource = "workspace"\nreports_dir = "reports"\n')
    )
    return EvidenceTask(
        spec,
        {"root": "corpus", "markers": {"definition": MARKER}, "output": "gl.json"},
        task_dir=task_dir,
        base_dir=folder,
        extra_toolkits=toolkits,
    )


def test_a_caller_toolkit_is_observed_offered_and_run_by_operate(tmp_path: Path) -> None:
    glossary = Glossary()
    session = ToolkitSession(glossary_task(tmp_path, glossary))

    seen = session.observe()
    assert seen.toolkits["glossary"] == {"terms": 2, "captured": 0}
    assert set(seen.toolkits) == {"files", "glossary"}
    contract = {tool.name: tool for tool in seen.tools}["glossary.capture"]
    assert [(p.name, p.selection, p.depends_on) for p in contract.parameters] == [
        ("term", "explore", None),
        ("sense", "match", "term"),
    ]
    assert seen.capture_count == 0  # observing captured nothing

    offered = session.arguments("glossary.capture", seen.state_ref)
    assert offered.waiting_for_parent == ("sense",)
    token = next(o.id for o in offered.domains[0].options if o.label == "term token")
    children = session.arguments("glossary.capture", seen.state_ref, {"term": token})
    assert [o.label for o in children.domains[0].options] == ["token: auth", "token: parsing"]
    auth = children.domains[0].options[0].id
    done = asyncio.run(
        session.operate("glossary.capture", {"term": token, "sense": auth}, seen.state_ref)
    )
    assert done.ok, done.error

    after = session.observe()
    assert after.toolkits["glossary"] == {"terms": 2, "captured": 1}
    categories = session.arguments("record_evidence", after.state_ref)
    category = categories.domains[0].options[0].id
    passages = session.arguments("record_evidence", after.state_ref, {"category": category})
    passage = passages.domains[0].options[0]
    assert "glossary:token/auth" in passage.label
    recorded = asyncio.run(
        session.operate(
            "record_evidence", {"category": category, "passage": passage.id}, after.state_ref
        )
    )
    assert recorded.ok, recorded.error
    assert [check.passed for check in session.observe().checks] == [True]


def test_a_caller_toolkit_is_offered_gated_and_run_by_delegation(
    tmp_path: Path, chat: ChatServer
) -> None:
    def explores_a_term(body: dict[str, Any]) -> Reply:
        """The term (explore) at 0.40, the sense (match) at 0.97: only explore passes 0.40."""
        shown = view(body)
        ids = chosen_ids(shown, "glossary.capture", {"term": "token", "sense": "auth"})
        return step_reply(shown, "glossary.capture", ids, weights={ids[0]: 0.40, ids[1]: 0.97})

    chat.then(
        explores_a_term,
        pick("record_evidence", category="definition"),
        pick("save_report"),
    )
    session = ToolkitSession(
        glossary_task(tmp_path, Glossary()), model=ChatCompletionsClient(chat.settings())
    )
    archive = tmp_path / "steps.jsonl"

    result = delegate(session, "Quote what a token means here.", archive=archive)

    assert result.status == "completed", result.stopped_because
    assert [step.tool for step in result.steps] == [
        "glossary.capture",
        "record_evidence",
        "save_report",
    ]
    assert result.cost.refusals == 0
    first = view(chat.bodies[0])
    assert first["toolkits"]["glossary"] == {"terms": 2, "captured": 0}
    offer = next(item for item in first["tools_on_offer"] if item["tool"] == "glossary.capture")
    assert [p["selection"] for p in offer["parameters"]] == ["explore", "match"]
    schema = chat.bodies[0]["response_format"]["json_schema"]["schema"]
    branches = schema["properties"]["step"]["anyOf"]
    names = [
        (branch.get("anyOf") or [branch])[0]["properties"]["tool"].get("const")
        for branch in branches
    ]
    assert "glossary.capture" in names
    assert "glossary.lookup" in names
    turn = json.loads(archive.read_text(encoding="utf-8").splitlines()[1])
    figures = {figure["field"]: figure for figure in turn["gate"]["figures"]}
    assert turn["gate"]["gated"] is True
    assert figures["term"]["selection"] == "explore"
    assert figures["term"]["probability"] == pytest.approx(0.40, abs=0.01)
    assert figures["term"]["passed"] is True
    assert figures["sense"]["selection"] == "match"
    assert figures["sense"]["passed"] is True


def test_a_match_parameter_of_a_caller_tool_is_held_to_the_match_gate(
    tmp_path: Path, chat: ChatServer
) -> None:
    def unsure_of_the_sense(body: dict[str, Any]) -> Reply:
        shown = view(body)
        ids = chosen_ids(shown, "glossary.capture", {"term": "token", "sense": "auth"})
        return step_reply(shown, "glossary.capture", ids, weights={ids[0]: 0.97, ids[1]: 0.40})

    chat.then(unsure_of_the_sense, unsure_of_the_sense)
    glossary = Glossary()
    session = ToolkitSession(
        glossary_task(tmp_path, glossary), model=ChatCompletionsClient(chat.settings())
    )

    result = delegate(session, "Quote what a token means here.")

    assert result.status == "uncertain_choice"
    assert "sense" in result.stopped_because
    assert glossary.captured == 0


def test_a_trusted_generator_feeds_the_query_pool_with_checked_text_only(tmp_path: Path) -> None:
    calls: list[GeneratorContext] = []

    def propose(context: GeneratorContext) -> list[object]:
        calls.append(context)
        return ["verify_token", "two\nlines", 42, "x" * 500, "\u202eflipped", "check(t)"]

    class Proposer:
        name = "proposer"

        def observe(self) -> Mapping[str, JsonValue]:
            return {}

        def install(self, task: ToolRegistry) -> None:
            task.register_generator(TrustedGenerator("queries", propose))

    write(tmp_path / "corpus" / "a.py", "def check(t):\n    return verify_token(t)\n")
    spec, task_dir = load_task(
        write(tmp_path / "ws.toml", 'name = "ws"\nsource = "workspace"\nreports_dir = "r"\n')
    )
    task = EvidenceTask(
        spec,
        {"root": "corpus", "markers": {"impl": "return verify_token"}, "output": "o.json"},
        task_dir=task_dir,
        base_dir=tmp_path,
        extra_toolkits=[Proposer()],
    )
    session = ToolkitSession(task)
    seen = session.observe()
    assert calls == []  # observing asks no generator

    queries = session.arguments("files.search", seen.state_ref).domains[0]
    labels = [option.label for option in queries.options]
    assert labels == ["return verify_token", "verify_token", "check(t)"]
    assert task.pools_rejected == {"queries": 4}
    assert task.pool("queries") == ("verify_token", "check(t)")
    assert len(calls) == 1  # the same state asks once
    assert calls[0].markers == {"impl": "return verify_token"}

    chosen = next(o.id for o in queries.options if o.label == "check(t)")
    found = asyncio.run(session.operate("files.search", {"query": chosen}, seen.state_ref))
    assert found.ok
    assert isinstance(found.result, dict)
    assert found.result["query"] == "check(t)"  # handed over as literal search text
    session.arguments("files.search", session.observe().state_ref)
    assert len(calls) == 2  # a new capture is a new state


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Parameter("Bad Name", "x"), "snake_case"),
        (lambda: Parameter("term", "x", selection="guess"), "selection"),  # type: ignore[arg-type]
        (lambda: Tool("Glossary", "x", lambda v: None), "lower-case"),
        (
            lambda: Tool("g.t", "x", lambda v: None, (Parameter("a", "x", depends_on="b"),), {}),
            "not an earlier parameter",
        ),
        (lambda: Tool("g.t", "x", lambda v: None, (Parameter("a", "x"),), {}), "candidates"),
        (lambda: TrustedGenerator("queries", lambda c: [], max_items=0), "max_items"),
    ],
)
def test_a_badly_declared_tool_parameter_or_generator_is_refused(make: Any, message: str) -> None:
    with pytest.raises(TaskDefinitionError, match=message):
        make()


def test_a_toolkit_whose_observe_captures_or_whose_tool_name_is_taken_is_refused(
    tmp_path: Path,
) -> None:
    class Capturing(Glossary):
        name = "capturing"

        def __init__(self) -> None:
            super().__init__()
            self.store: Any = None

        def install(self, task: ToolRegistry) -> None:
            self.store = task.store

        def observe(self) -> Mapping[str, JsonValue]:
            self.store.put("sneaky capture", "x")
            return {}

    session = ToolkitSession(glossary_task(tmp_path / "a", Capturing()))
    with pytest.raises(TaskDefinitionError, match="captured"):
        session.observe()

    class Clashing(Glossary):
        name = "clashing"

        def install(self, task: ToolRegistry) -> None:
            task.add_tool(Tool("save_report", "mine", lambda v: None))

    with pytest.raises(TaskDefinitionError, match="save_report"):
        glossary_task(tmp_path / "b", Clashing())


# --- one object per tool ---------------------------------------------------------------


class Shelf:
    """A source: the books a definition's candidates and runner read."""

    def __init__(self, *books: str) -> None:
        self.books = list(books)
        self.lent: list[str] = []


def _books(shelf: Shelf, _parent: str | None) -> list[CandidateValue]:
    return [CandidateValue(book, f"the book {book}") for book in shelf.books]


def _lend(shelf: Shelf, values: Mapping[str, str]) -> JsonValue:
    shelf.books.remove(values["book"])
    shelf.lent.append(values["book"])
    return {"lent": values["book"]}


LEND = ToolDefinition(
    "shelf.lend",
    "Lend one book on the shelf.",
    _lend,
    (Parameter("book", "a book on the shelf", "explore"),),
    {"book": _books},
    effect="capture",
)


def test_a_bound_definition_runs_and_offers_over_its_own_source() -> None:
    first, second = Shelf("dune", "emma"), Shelf("ulysses")
    lend_first, lend_second = LEND.bind(first), LEND.bind(second)

    assert [c.value for c in lend_first.offer("book", None)] == ["dune", "emma"]
    assert [c.value for c in lend_second.offer("book", None)] == ["ulysses"]
    assert asyncio.run(lend_first.execute({"book": "emma"})) == {"lent": "emma"}
    assert (first.books, first.lent, second.books) == (["dune"], ["emma"], ["ulysses"])
    assert lend_first.contract == LEND.bind(Shelf()).contract
    assert lend_first.contract.effect == "capture"
    assert lend_first.advertised


def test_an_older_name_is_the_same_tool_unadvertised() -> None:
    older = LEND.older_name("shelf.borrow")
    bound = older.bind(Shelf("dune"))

    assert (older.name, older.older_name_of, older.advertised) == (
        "shelf.borrow",
        "shelf.lend",
        False,
    )
    assert not bound.advertised
    assert bound.contract.parameters == LEND.bind(Shelf()).contract.parameters
    assert asyncio.run(bound.execute({"book": "dune"})) == {"lent": "dune"}


def test_a_definition_is_checked_like_a_tool_when_bound() -> None:
    missing = ToolDefinition(
        "shelf.count", "Count books.", _lend, (Parameter("book", "a book"),), {}
    )
    with pytest.raises(TaskDefinitionError, match="every parameter needs candidates"):
        missing.bind(Shelf())


def test_every_builtin_name_is_unique_and_each_older_one_points_at_an_advertised_tool() -> None:
    names = [tool.name for tool in BUILTIN_TOOLS]
    assert len(set(names)) == len(names)
    assert set(ALIASES.values()) <= set(TOOL_NAMES)
    assert not set(ALIASES) & set(TOOL_NAMES)


def _installed(task: EvidenceTask) -> tuple[list[str], list[str]]:
    tools = task.tools()
    return (
        [tool.name for tool in tools if tool.advertised],
        [tool.name for tool in tools if not tool.advertised],
    )


def test_web_and_workspace_tasks_install_exactly_the_declared_builtin_tools(
    tmp_path: Path,
) -> None:
    spec, task_dir = load_task(web_task(tmp_path / "web"))
    web = EvidenceTask(spec, web_inputs_static(), task_dir=task_dir)
    root = tmp_path / "files" / "root"
    write(root / "notes.md", "Python 3.11 is required.\n")
    files_task = write(
        tmp_path / "files" / "task.toml",
        'name = "notes"\nsource = "workspace"\nreports_dir = "reports"\n',
    )
    spec, task_dir = load_task(files_task)
    files = EvidenceTask(
        spec,
        {"root": str(root), "markers": {"python": "Python 3.11"}, "output": "run.json"},
        task_dir=task_dir,
    )

    web_names, web_older = _installed(web)
    file_names, file_older = _installed(files)
    assert web_names == [name for name in TOOL_NAMES if not name.startswith("files.")]
    assert file_names == [name for name in TOOL_NAMES if not name.startswith("web.")]
    assert sorted({*web_names, *file_names}) == sorted(TOOL_NAMES)
    assert sorted({*web_older, *file_older}) == sorted(ALIASES)
