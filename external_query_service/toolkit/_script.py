"""Task scripts: a Python module exporting ``workflow = TaskScript(build)``.

The script declares its kind (``source``: ``web`` or ``workspace``), its name, budget and
delegation rules; ``build(inputs)`` assembles the task from validated runtime inputs: the
store, the toolkits, the evidence categories, the output location and the caller's
verifier. The runner checks the inputs first (``bind``), and calls ``build`` once, on the
session's first need of the task (``BoundScript.task``), never before:

- ``markers``: a non-empty object mapping each category label to a non-empty marker;
- ``output``: a new report path (relative to the caller's folder, or absolute inside an
  existing folder); an existing file there is refused, never overwritten;
- a web task: ``url`` and ``allowed_origins`` (the ``url`` inside them); a workspace task:
  ``root`` and optional ``queries``.

``load_script(path)`` imports a script (that runs the module's top level, which only
declares; ``build`` is not called) and returns its ``workflow``. Importing is trusting: a
task script is the caller's own code, like a settings file. What the tools capture is data
and is never imported or executed.

```python
from external_query_service.toolkit import EvidenceTask, TaskScript, WebToolkit

def build(inputs):
    web = WebToolkit(inputs["url"], inputs["allowed_origins"])
    return EvidenceTask.from_inputs(inputs, toolkits=[web])

workflow = TaskScript(build, source="web", name="research")
```
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from .._clock import Clock
from .._evidence_store import EvidenceStore
from .._jsonio import loads_strict
from ..errors import InputError, TaskDefinitionError, ToolkitError
from ..settings import NetworkSettings, format_validation_error
from ._fsguard import split_relpath
from ._operations import ToolkitSession
from ._taskfile import (
    MAX_TASK_BYTES,
    DelegationRules,
    RuntimeInputs,
    TaskBudget,
    TaskSpec,
    resolve_inputs,
    validate_inputs,
)
from ._tasks import EvidenceTask

if TYPE_CHECKING:
    from ..llm._client import ChatCompletionsClient

__all__ = [
    "BoundScript",
    "RuntimeInputs",
    "TaskScript",
    "load_script",
    "parse_inputs",
]

#: A task script's ``build``: the validated inputs → the task.
Build = Callable[[RuntimeInputs], EvidenceTask]


class TaskScript:
    """A task script's declaration (see the module docstring): ``build`` and the task's
    kind, name, description, required categories, budget and delegation rules. Declaring
    runs nothing; a bad declaration is a ``TaskDefinitionError``."""

    def __init__(
        self,
        build: Build,
        *,
        source: Literal["web", "workspace"],
        name: str = "task-script",
        description: str = "",
        required: tuple[str, ...] | None = None,
        budget: TaskBudget | None = None,
        delegation: DelegationRules | None = None,
    ) -> None:
        if not callable(build):
            raise TaskDefinitionError("TaskScript(build): build must be a function of the inputs")
        self.build = build
        try:
            self.spec = TaskSpec(
                name=name,
                description=description,
                source=source,
                reports_dir=".",
                required=required,
                budget=budget or TaskBudget(),
                delegation=delegation or DelegationRules(),
            )
        except ValidationError as exc:
            raise TaskDefinitionError(f"TaskScript: {format_validation_error(exc)}") from None

    def inputs_schema(self) -> dict[str, Any]:
        """The JSON schema of this script's runtime inputs."""
        text = {"type": "string", "minLength": 1}
        properties: dict[str, Any] = {
            "markers": {
                "type": "object",
                "minProperties": 1,
                "additionalProperties": text,
                "description": "category label → marker",
            },
            "output": text | {"description": "a new report path, never overwritten"},
        }
        if self.spec.source == "web":
            properties["url"] = text
            properties["allowed_origins"] = {"type": "array", "minItems": 1, "items": text}
        else:
            properties["root"] = text
            properties["queries"] = {"type": "array", "items": text}
        required = [
            "markers",
            "output",
            *(("url", "allowed_origins") if "url" in properties else ("root",)),
        ]
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    def bind(
        self,
        given: Mapping[str, Any],
        *,
        base_dir: Path,
        network: NetworkSettings | None = None,
        clock: Clock | None = None,
        store: EvidenceStore | None = None,
    ) -> BoundScript:
        """Check ``given`` against the declaration (static: nothing is fetched or read, and
        ``build`` is not called); ``InputError`` with one line when they do not fit."""
        task_inputs = validate_inputs(dict(given))
        task_dir, output = _output_place(task_inputs.output, base_dir)
        located = task_inputs.model_copy(update={"output": output})
        resolved = resolve_inputs(self.spec, located, base_dir=base_dir)
        if (task_dir / output).exists() or (task_dir / output).is_symlink():
            raise InputError(
                f"inputs: output {task_inputs.output} already exists; reports are never overwritten"
            )
        return BoundScript(
            self,
            RuntimeInputs(
                given,
                task_inputs=located,
                root=Path(resolved.root) if resolved.root is not None else None,
                spec=self.spec,
                task_dir=task_dir,
                base_dir=base_dir,
                network=network or NetworkSettings(),
                clock=clock,
                store=store if store is not None else EvidenceStore(),
            ),
        )


class BoundScript:
    """A script with checked inputs: ``task()`` calls ``build`` the first time only."""

    def __init__(self, script: TaskScript, inputs: RuntimeInputs) -> None:
        self.script = script
        self.inputs = inputs
        self._task: EvidenceTask | None = None
        self.builds = 0

    def task(self) -> EvidenceTask:
        """The registered task, built once (``TaskDefinitionError`` if ``build`` returns
        something else)."""
        if self._task is None:
            self.builds += 1
            built = self.script.build(self.inputs)
            if not isinstance(built, EvidenceTask):
                raise TaskDefinitionError(
                    f"build(inputs) returned {type(built).__name__}, not an EvidenceTask"
                )
            self._task = built
        return self._task

    def session(
        self, *, model: ChatCompletionsClient | None = None, direct_only: bool = False
    ) -> ToolkitSession:
        """A session that builds the task on its first need of it."""
        return ToolkitSession(
            build=self.task, store=self.inputs.store, model=model, direct_only=direct_only
        )


def _output_place(output: str, base_dir: Path) -> tuple[Path, str]:
    """The folder a report is written under and the path below it: a relative ``output``
    stays below ``base_dir``; an absolute one needs an existing folder."""
    path = Path(output)
    if path.is_absolute():
        if not path.parent.is_dir():
            raise InputError(f"inputs: the folder of output {output} does not exist")
        return path.parent, path.name
    try:
        parts = split_relpath(output)
    except ToolkitError:
        raise InputError(f"inputs: output must stay below the current folder: {output}") from None
    if not parts:
        raise InputError("inputs: output names a folder, not a file")
    return base_dir, "/".join(parts)


def parse_inputs(text: str, *, origin: str = "--inputs") -> dict[str, Any]:
    """Inline runtime inputs: one JSON object (``InputError`` with one line otherwise)."""
    if len(text.encode("utf-8")) > MAX_TASK_BYTES:
        raise InputError(f"{origin}: more than {MAX_TASK_BYTES} bytes")
    data = loads_strict(text, origin=origin)
    if not isinstance(data, dict):
        raise InputError(f"{origin}: the inputs must be a JSON object")
    return data


def load_script(path: str | Path) -> TaskScript:
    """Import the task script at ``path`` and return its ``workflow`` (``build`` is not
    called). ``TaskDefinitionError`` with one line when it cannot be used."""
    path = Path(path)
    if path.suffix != ".py" or not path.is_file():
        raise TaskDefinitionError(f"{path}: a task script is an existing .py file")
    resolved = path.resolve()
    name = "_eqs_task_" + hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has one
        raise TaskDefinitionError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up by name
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise TaskDefinitionError(
            f"{path}: importing the task script failed: {type(exc).__name__}: {first}"
        ) from None
    workflow = getattr(module, "workflow", None)
    if not isinstance(workflow, TaskScript):
        raise TaskDefinitionError(f"{path}: the script exports no workflow = TaskScript(build)")
    return workflow
