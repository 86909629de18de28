"""One object per tool: a ``ToolDefinition`` binds its contract, runner and candidates to a
source; the built-in names and their older aliases are read off the definitions, and match
what tasks actually install."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest
from pydantic import JsonValue

from external_query_service.errors import TaskDefinitionError
from external_query_service.toolkit import EvidenceTask, load_task
from external_query_service.toolkit.kits import ALIASES, BUILTIN_TOOLS, TOOL_NAMES
from external_query_service.toolkit.tools import CandidateValue, Parameter, ToolDefinition

from .test_toolkit_tasks import web_inputs_static, web_task, write


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
