"""Task files and their runtime inputs, validated before anything is collected.

A task file (TOML or JSON) says what kind of evidence task it is and where its reports
go; the runtime inputs (a JSON object) say what to look at and what counts as evidence:

```toml
name = "release-requirements"
description = "Find the documented requirements and quote them."
source = "web"                 # or "workspace", or "browser" (web pages as a browser shows them)
reports_dir = "reports"        # relative to this file; every report stays inside it
required = ["requirements"]    # categories that must be backed (default: every marker)

[budget]                        # all optional
max_pages = 10
max_bytes = 5000000
max_depth = 2
max_files = 2000
max_file_bytes = 1000000
max_records_per_category = 3

[delegation]                    # all optional: how a model-driven run is bounded and gated
max_steps = 30                  # operations the model may choose
timeout_s = 300
max_tokens = 200000             # prompt + completion tokens, as the endpoint reports them
max_refusals = 3                # replies refused (not on offer, stale, malformed) before stopping
top_logprobs = 5                # alternatives asked for per token
min_probability = 0.55          # a "match" choice: at least this likely ...
min_margin = 0.10               # ... and this far ahead of the next option
explore_min_probability = 0.30  # an "explore" choice and the choice of tool
save_incomplete = true          # save the report at the end even if a check still fails
```

```json
{"url": "https://docs.example.org/", "allowed_origins": ["https://docs.example.org"],
 "markers": {"requirements": "Python 3.11"}, "output": "research.json"}
```

A workspace task takes ``root`` (relative paths resolve against the inputs file's folder)
and optional ``queries`` instead of ``url`` and ``allowed_origins``. ``output`` is a path
inside ``reports_dir``. Every problem is an ``InputError`` with one line.

``RuntimeInputs`` is what a task script's ``build`` gets (``script.py``): the inputs as
the caller gave them, with what the runner settled (the spec, the folders, the network
policy, the clock and the store). It lives here, beside the inputs it wraps, so the task
(``tasks.py``) can take it without importing the script runner.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import rfc8785
from pydantic import (
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
)

from .._clock import Clock
from .._digests import sha256_digest
from .._evidence_store import EvidenceStore
from .._frozen import Frozen
from .._jsonio import load_json_file, read_text_file
from ..errors import InputError, ToolkitError
from ..settings import NetworkSettings, format_validation_error
from ._fsguard import split_relpath
from ._origins import OriginSet

__all__ = [
    "MAX_TASK_BYTES",
    "DelegationRules",
    "RuntimeInputs",
    "TaskBudget",
    "TaskInputs",
    "TaskSpec",
    "load_inputs",
    "load_task",
    "resolve_inputs",
    "validate_inputs",
]

MAX_TASK_BYTES = 1_000_000
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class TaskBudget(Frozen):
    """A task's limits: pages, bytes, link depth, files, bytes per file and records per
    category."""

    # Strict: ``true``, ``"10"`` or ``10.0`` in a task file are mistakes, not numbers.
    max_pages: StrictInt = Field(default=10, ge=1, le=500)
    max_bytes: StrictInt = Field(default=5_000_000, ge=1)
    max_depth: StrictInt = Field(default=2, ge=0, le=20)
    max_files: StrictInt = Field(default=2000, ge=1)
    max_file_bytes: StrictInt = Field(default=1_000_000, ge=1)
    max_records_per_category: StrictInt = Field(default=3, ge=1, le=100)


class DelegationRules(Frozen):
    """How a delegated run of the task is bounded and when its choices are trusted."""

    max_steps: StrictInt = Field(default=30, ge=1, le=500)
    timeout_s: StrictFloat = Field(default=300.0, gt=0, le=86_400)
    max_tokens: StrictInt = Field(default=200_000, ge=1)
    max_refusals: StrictInt = Field(default=3, ge=1, le=50)
    top_logprobs: StrictInt = Field(default=5, ge=1, le=20)
    min_probability: StrictFloat = Field(default=0.55, ge=0, le=1)
    min_margin: StrictFloat = Field(default=0.10, ge=0, le=1)
    explore_min_probability: StrictFloat = Field(default=0.30, ge=0, le=1)
    save_incomplete: StrictBool = True


class TaskSpec(Frozen):
    """A validated task file. ``task_dir`` (not part of the file) is the file's folder."""

    name: str = Field(pattern=_NAME_PATTERN)
    description: str = ""
    source: Literal["web", "workspace", "browser"]
    reports_dir: str = Field(min_length=1)
    required: tuple[str, ...] | None = None
    budget: TaskBudget = TaskBudget()
    delegation: DelegationRules = DelegationRules()

    @field_validator("reports_dir")
    @classmethod
    def _below_task(cls, value: str) -> str:
        try:
            split_relpath(value)
        except ToolkitError:
            raise ValueError("reports_dir must stay below the task's folder") from None
        return value

    @field_validator("required")
    @classmethod
    def _non_empty(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and (not value or any(not item.strip() for item in value)):
            raise ValueError("required must list at least one non-empty category")
        return value

    @property
    def digest(self) -> str:
        """sha256 of the task's canonical JSON (RFC 8785): the report's task identity.

        A task without a ``[delegation]`` table keeps the digest it had before the table
        existed: the default rules are left out."""
        exclude = {"delegation"} if self.delegation == DelegationRules() else set()
        return sha256_digest(rfc8785.dumps(self.model_dump(mode="json", exclude=exclude)))


class TaskInputs(Frozen):
    """Runtime inputs. Exactly one source: ``url`` + ``allowed_origins``, or ``root``. A
    browser task may name the caller's browser ``session`` and ``tab`` (the tab needs its
    session): pages are rendered there, and a named tab is reused and never closed."""

    markers: dict[str, str] = Field(min_length=1)
    output: str = Field(min_length=1)
    url: str | None = None
    allowed_origins: tuple[str, ...] = ()
    root: str | None = None
    queries: tuple[str, ...] = ()
    session: str | None = Field(default=None, min_length=1)
    tab: str | None = Field(default=None, min_length=1)

    @field_validator("markers")
    @classmethod
    def _markers(cls, value: dict[str, str]) -> dict[str, str]:
        for label, marker in value.items():
            if not label.strip():
                raise ValueError("a marker category label is empty")
            if not marker.strip():
                raise ValueError(f"the marker for {label!r} is empty")
        return value

    @field_validator("queries")
    @classmethod
    def _queries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not item.strip() for item in value):
            raise ValueError("a query is empty")
        return value

    @property
    def digest(self) -> str:
        """``sha256:`` of the inputs' canonical JSON. Where pages are rendered (``session``,
        ``tab``) is not what the task is, so it is left out: the same task in another tab
        has the same digest."""
        return sha256_digest(rfc8785.dumps(self.model_dump(mode="json", exclude=set(_PLACEMENT))))


#: The inputs that say where a browser task's pages are rendered, not what the task is.
_PLACEMENT = frozenset({"session", "tab"})


class RuntimeInputs(Mapping[str, Any]):
    """The validated runtime inputs ``build`` gets: it reads like the JSON object the caller
    gave (``inputs["url"]``), and carries what the runner settled: ``task_inputs`` (the
    validated model), ``root`` (a workspace task's folder, resolved), ``spec``,
    ``task_dir`` (the folder the report is written under), ``base_dir`` (relative paths
    resolve against it), ``network``, ``clock`` and a ``store`` shared with the MCP
    server's answer chain."""

    def __init__(
        self,
        given: Mapping[str, Any],
        *,
        task_inputs: TaskInputs,
        root: Path | None,
        spec: TaskSpec,
        task_dir: Path,
        base_dir: Path,
        network: NetworkSettings,
        clock: Clock | None,
        store: EvidenceStore,
    ) -> None:
        self._given = dict(given)
        self.task_inputs = task_inputs
        self.root = root
        self.spec = spec
        self.task_dir = task_dir
        self.base_dir = base_dir
        self.network = network
        self.clock = clock
        self.store = store

    def __getitem__(self, key: str) -> Any:
        return self._given[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._given)

    def __len__(self) -> int:
        return len(self._given)

    @property
    def output_path(self) -> Path:
        """Where the report will be written."""
        return self.task_dir / self.task_inputs.output


def _validated(model: type[Frozen], data: Any, origin: str) -> Any:
    if not isinstance(data, dict):
        raise InputError(f"{origin}: the root must be an object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{origin}: {format_validation_error(exc)}") from None


def load_task(path: str | Path) -> tuple[TaskSpec, Path]:
    """Read and validate a task file (``.toml`` or ``.json``); returns it and its folder."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".toml":
        try:
            data: Any = tomllib.loads(read_text_file(path, max_bytes=MAX_TASK_BYTES))
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"{path}: invalid TOML: {exc}") from None
    elif suffix == ".json":
        data = load_json_file(path, max_bytes=MAX_TASK_BYTES)
    else:
        raise InputError(f"{path}: a task file is .toml or .json")
    spec: TaskSpec = _validated(TaskSpec, data, str(path))
    return spec, path.resolve().parent


def validate_inputs(data: Any, *, origin: str = "inputs") -> TaskInputs:
    """Runtime inputs from a mapping (``InputError`` with one line when invalid)."""
    inputs: TaskInputs = _validated(TaskInputs, data, origin)
    return inputs


def load_inputs(path: str | Path) -> tuple[TaskInputs, Path]:
    """Read runtime inputs from a JSON file; returns them and the file's folder."""
    path = Path(path)
    inputs: TaskInputs = _validated(
        TaskInputs, load_json_file(path, max_bytes=MAX_TASK_BYTES), str(path)
    )
    return inputs, path.resolve().parent


def resolve_inputs(
    spec: TaskSpec, inputs: TaskInputs | dict[str, Any], *, base_dir: Path
) -> TaskInputs:
    """Check the inputs against the task (static: nothing is fetched or read).

    Returns the inputs with ``root`` made absolute (against ``base_dir``) and ``output``
    made relative to the reports folder.
    """
    if not isinstance(inputs, TaskInputs):
        inputs = validate_inputs(inputs)
    labels = set(inputs.markers)
    unknown = sorted(set(spec.required or ()) - labels)
    if unknown:
        raise InputError(f"inputs: required categories without a marker: {', '.join(unknown)}")
    update: dict[str, Any] = {"output": _output(inputs.output)}
    if (inputs.session is not None or inputs.tab is not None) and spec.source != "browser":
        raise InputError("inputs: session and tab are for a browser task only")
    if inputs.tab is not None and inputs.session is None:
        raise InputError("inputs: a tab needs its session")
    if spec.source in ("web", "browser"):
        if inputs.root is not None or inputs.queries:
            raise InputError("inputs: a web task takes url and allowed_origins, not root/queries")
        if not inputs.url or not inputs.allowed_origins:
            raise InputError("inputs: a web task needs url and allowed_origins")
        origins = OriginSet(inputs.allowed_origins)
        if not origins.allows(inputs.url):
            raise InputError(f"inputs: url {inputs.url} is outside allowed_origins")
    else:
        if inputs.url is not None or inputs.allowed_origins:
            raise InputError("inputs: a workspace task takes root (and queries), not url")
        if not inputs.root:
            raise InputError("inputs: a workspace task needs root")
        root = Path(inputs.root)
        root = root if root.is_absolute() else base_dir / root
        if not root.is_dir():
            raise InputError(f"inputs: root is not a folder: {inputs.root}")
        update["root"] = str(root)
    return inputs.model_copy(update=update)


def _output(output: str) -> str:
    """``output`` as a clean path relative to the reports folder."""
    try:
        parts = split_relpath(output)
    except ToolkitError:
        raise InputError(f"inputs: output must stay inside the reports folder: {output}") from None
    if not parts:
        raise InputError("inputs: output names the reports folder itself")
    return str(PurePosixPath(*parts))
