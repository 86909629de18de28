"""Tools, the toolkits that provide them, and trusted generators that feed candidate pools.

A ``Tool`` is one object holding its contract (name, description, effect, parameters), its
runner and, per parameter, where its candidates come from. A session offers a parameter's
candidates as option ids and runs the tool only with values it offered, so a caller or a
model never passes free text for a URL, a path or a passage.

A ``ToolDefinition`` is a tool declared once, at module level, over the object its runner
and candidates read (its source: a toolkit, a store, a task); ``bind(source)`` makes the
``Tool``. The built-in tools are definitions, so their names, and the older names kept
callable for a release, are known before any task exists.

A ``Toolkit`` provides tools: ``name``, ``observe()`` (a compact, stable, JSON projection of
its state that captures nothing) and ``install(task)`` (register its tools, and any
``TrustedGenerator``, with the task). The built-in web and workspace tools are toolkits too
(``kits.py``); a caller adds its own the same way.

A ``TrustedGenerator`` is a function the caller registers that proposes text, such as search
queries or titles. Its output is checked (strings only, one line, no control characters,
bounded length and count) and joins a named candidate pool that tools may offer from. It is
only ever a candidate value handed to a tool as data: never run as code, a command or a
selector.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import JsonValue

from .._evidence_store import EvidenceStore
from ..errors import TaskDefinitionError
from ..settings import NetworkSettings
from ._confidence import Selection
from ._contracts import CaptureSummary, Effect, ParameterContract, ToolContract

__all__ = [
    "MAX_POOL_ITEMS",
    "CandidateSource",
    "CandidateValue",
    "GeneratorContext",
    "Parameter",
    "PoolSet",
    "Runner",
    "Tool",
    "ToolDefinition",
    "ToolRegistry",
    "Toolkit",
    "TrustedGenerator",
]

_TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")
_PARAMETER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
#: The most values one candidate pool keeps (generated text beyond it is counted, not kept).
MAX_POOL_ITEMS = 200

#: Runs a tool with the values (not the ids) of its parameters; sync or async.
Runner = Callable[[Mapping[str, str]], "Awaitable[JsonValue] | JsonValue"]
#: What a ``ToolDefinition``'s runner and candidates read: a toolkit, a store, a task.
Source = TypeVar("Source")


@dataclass(frozen=True)
class CandidateValue:
    """One value a parameter may take, and a label for a reader (the model sees the label;
    the tool gets the value)."""

    value: str
    label: str


#: A parameter's candidates now: called with the chosen parent's value (None without one).
CandidateSource = Callable[[str | None], Iterable[CandidateValue]]


@dataclass(frozen=True)
class Parameter:
    """A tool parameter. ``selection`` says how sure a delegated model must be of its
    choice: ``match`` (one option is right: probability 0.55 and a lead of 0.10, by
    default) or ``explore`` (several are reasonable: probability 0.30, no margin).
    ``depends_on`` names an earlier parameter whose chosen value lists this one's
    candidates."""

    name: str
    description: str
    selection: Selection = "match"
    depends_on: str | None = None

    def __post_init__(self) -> None:
        if not _PARAMETER_NAME.match(self.name):
            raise TaskDefinitionError(
                f"parameter name {self.name!r} is not snake_case (at most 40 characters)"
            )
        if not self.description.strip():
            raise TaskDefinitionError(f"parameter {self.name!r} needs a description")
        if self.selection not in ("match", "explore"):
            raise TaskDefinitionError(
                f"parameter {self.name!r}: selection is 'match' or 'explore', "
                f"not {self.selection!r}"
            )

    @property
    def contract(self) -> ParameterContract:
        """The parameter as an observation shows it."""
        return ParameterContract(
            name=self.name,
            description=self.description,
            depends_on=self.depends_on,
            selection=self.selection,
        )


@dataclass(frozen=True)
class Tool:
    """One tool: contract, runner and candidates (see the module docstring).

    ``candidates`` maps every parameter to its ``CandidateSource``. ``advertised`` false
    keeps a tool callable by name but out of observations, MCP enums and delegation (an
    older name kept for one release).
    """

    name: str
    description: str
    run: Runner
    parameters: tuple[Parameter, ...] = ()
    candidates: Mapping[str, CandidateSource] = field(default_factory=dict)
    effect: Effect = "observe"
    advertised: bool = True

    def __post_init__(self) -> None:
        if not _TOOL_NAME.match(self.name):
            raise TaskDefinitionError(
                f"tool name {self.name!r} is not lower-case words joined by dots"
            )
        if not self.description.strip():
            raise TaskDefinitionError(f"tool {self.name!r} needs a description")
        seen: list[str] = []
        for parameter in self.parameters:
            if parameter.name in seen:
                raise TaskDefinitionError(f"{self.name}: parameter {parameter.name!r} twice")
            if parameter.depends_on is not None and parameter.depends_on not in seen:
                raise TaskDefinitionError(
                    f"{self.name}: {parameter.name!r} depends on {parameter.depends_on!r}, "
                    "which is not an earlier parameter"
                )
            seen.append(parameter.name)
        missing = [name for name in seen if name not in self.candidates]
        extra = sorted(set(self.candidates) - set(seen))
        if missing or extra:
            raise TaskDefinitionError(
                f"{self.name}: every parameter needs candidates, and only parameters have them "
                f"(missing: {missing or '-'}; unknown: {extra or '-'})"
            )

    @property
    def contract(self) -> ToolContract:
        """The tool as an observation shows it."""
        return ToolContract(
            name=self.name,
            description=self.description,
            effect=self.effect,
            parameters=tuple(parameter.contract for parameter in self.parameters),
        )

    def offer(self, parameter: str, parent: str | None) -> list[CandidateValue]:
        """The candidates of ``parameter`` now (given the parent's value for a dependent
        one); duplicates of a value are dropped, the first label kept."""
        found: dict[str, CandidateValue] = {}
        for candidate in self.candidates[parameter](parent):
            found.setdefault(candidate.value, candidate)
        return list(found.values())

    async def execute(self, values: Mapping[str, str]) -> JsonValue:
        """Run the tool with offered values (sync runners run inline)."""
        outcome = self.run(values)
        if inspect.isawaitable(outcome):
            return await outcome
        return outcome


@dataclass(frozen=True)
class ToolDefinition(Generic[Source]):
    """A tool declared once over its ``Source`` (see the module docstring): the contract,
    ``run(source, values)`` and, per parameter, ``candidates(source, parent)``.

    ``older_name_of`` marks an older name kept callable for one release: it names the
    advertised tool that does its job, and the bound tool is not advertised.
    """

    name: str
    description: str
    run: Callable[[Source, Mapping[str, str]], Awaitable[JsonValue] | JsonValue]
    parameters: tuple[Parameter, ...] = ()
    candidates: Mapping[str, Callable[[Source, str | None], Iterable[CandidateValue]]] = field(
        default_factory=dict
    )
    effect: Effect = "observe"
    older_name_of: str | None = None

    @property
    def advertised(self) -> bool:
        """Listed in observations, the MCP ``tool`` enum and delegation."""
        return self.older_name_of is None

    def older_name(self, name: str) -> ToolDefinition[Source]:
        """This tool under an older ``name``: callable for one release, not advertised."""
        return dataclasses.replace(self, name=name, older_name_of=self.name)

    def bind(self, source: Source) -> Tool:
        """The tool over ``source`` (checked like any ``Tool``)."""
        return Tool(
            self.name,
            self.description,
            functools.partial(self.run, source),
            self.parameters,
            {name: functools.partial(offer, source) for name, offer in self.candidates.items()},
            effect=self.effect,
            advertised=self.advertised,
        )


@dataclass(frozen=True)
class GeneratorContext:
    """What a trusted generator is shown: the task's categories and markers, the latest
    captures (no text) and the number of records so far."""

    markers: Mapping[str, str]
    captures: tuple[CaptureSummary, ...]
    records: int


@dataclass(frozen=True)
class TrustedGenerator:
    """A caller's text generator feeding the candidate pool ``pool`` (see the module
    docstring). ``kind`` says what it proposes (search ``query`` text or ``title`` text);
    each item is at most ``max_chars`` characters and a call keeps at most ``max_items``."""

    pool: str
    generate: Callable[[GeneratorContext], Iterable[object]]
    kind: Literal["query", "title"] = "query"
    max_items: int = 20
    max_chars: int = 200

    def __post_init__(self) -> None:
        if not _PARAMETER_NAME.match(self.pool):
            raise TaskDefinitionError(f"pool name {self.pool!r} is not snake_case")
        if not 1 <= self.max_items <= MAX_POOL_ITEMS or not 1 <= self.max_chars <= 2_000:
            raise TaskDefinitionError(
                f"generator for {self.pool!r}: max_items 1–{MAX_POOL_ITEMS}, max_chars 1–2000"
            )


def _acceptable(item: object, max_chars: int) -> str | None:
    """``item`` as a candidate value, or None when it is not one: a string of one line,
    without control or format characters, non-empty and at most ``max_chars``."""
    if not isinstance(item, str):
        return None
    text = " ".join(item.split())
    if not text or len(text) > max_chars or text != item.strip():
        return None
    if any(unicodedata.category(char) in ("Cc", "Cf") for char in text):
        return None
    return text


class PoolSet:
    """The candidate pools of one task: what its trusted generators proposed and passed the
    check, in the order first proposed, and how many proposals were refused (``rejected``)."""

    def __init__(self) -> None:
        self._generators: list[TrustedGenerator] = []
        self._pools: dict[str, dict[str, None]] = {}
        self.rejected: dict[str, int] = {}
        self._version: object = None

    def register(self, generator: TrustedGenerator) -> None:
        """Add ``generator``; its pool starts empty."""
        self._generators.append(generator)
        self._pools.setdefault(generator.pool, {})
        self.rejected.setdefault(generator.pool, 0)

    def names(self) -> tuple[str, ...]:
        """The pools registered so far."""
        return tuple(self._pools)

    def values(self, pool: str) -> tuple[str, ...]:
        """The pool's accepted values (empty for a pool nobody registered)."""
        return tuple(self._pools.get(pool, {}))

    def refresh(self, version: object, context: Callable[[], GeneratorContext]) -> None:
        """Ask every generator once for ``version`` of the task's state (a new capture or
        record makes a new version); the same version asks nobody again."""
        if version == self._version or not self._generators:
            return
        self._version = version
        shown = context()
        for generator in self._generators:
            pool = self._pools[generator.pool]
            kept = 0
            for item in generator.generate(shown):
                text = _acceptable(item, generator.max_chars)
                if text is None or kept >= generator.max_items or len(pool) >= MAX_POOL_ITEMS:
                    self.rejected[generator.pool] += 1
                    continue
                kept += 1
                pool.setdefault(text, None)


class ToolRegistry(Protocol):
    """What a toolkit's ``install`` gets: the task's store, categories and network policy,
    and where to register tools and generators."""

    @property
    def store(self) -> EvidenceStore:
        """The task's store: where tools capture."""
        ...

    @property
    def markers(self) -> dict[str, str]:
        """The task's categories: label → marker."""
        ...

    @property
    def network(self) -> NetworkSettings:
        """The network policy web tools fetch under."""
        ...

    def add_tool(self, tool: Tool) -> None:
        """Register ``tool`` (names are unique)."""
        ...

    def register_generator(self, generator: TrustedGenerator) -> None:
        """Register a trusted generator feeding ``generator.pool``."""
        ...

    def pool(self, name: str) -> tuple[str, ...]:
        """The accepted values of candidate pool ``name``."""
        ...


@runtime_checkable
class Toolkit(Protocol):
    """A provider of tools (see the module docstring)."""

    @property
    def name(self) -> str:
        """A unique name for the toolkit (its projection's key in an observation)."""
        ...

    def observe(self) -> Mapping[str, JsonValue]:
        """A compact, stable JSON projection of the toolkit's state; captures nothing."""
        ...

    def install(self, task: ToolRegistry) -> None:
        """Register the toolkit's tools (and any trusted generator) with ``task``."""
        ...
