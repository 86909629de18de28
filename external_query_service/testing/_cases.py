"""Regression cases: a question asked in a world, and what the answer must (not) hold.

```toml
world = "worlds/zhanjiang"          # default for the cases below, relative to this file
now = "2026-11-30T10:00:00+08:00"   # optional; default: the world's clock
markers = ["zh"]                    # optional pytest markers for every case

[[case]]
name = "weather-tomorrow"
question = "湛江明天天气怎么样？"
semantics.query_kind = "weather"
semantics.location = "湛江"
semantics.time_range = { start = "2026-12-01", end = "2026-12-01" }

[case.expect]
status = "answered"                 # answered | insufficient_evidence | clarify
reason = "out_of_time_range"        # the reason code when not answered
contract = "direct_fact"
sites = ["api.open-meteo.com"]      # must be among the displayed sources' sites
not_sites = ["spam.example"]        # must be neither displayed nor admitted
answer_contains = ["24.1"]
answer_excludes = ["停课"]
evidence_contains = ["最高气温"]     # some admitted evidence snippet holds it
evidence_excludes = ["忽略之前"]
min_sources = 1
```

``run_case`` serves the world on loopback, asks in-process, and lists every mismatch;
``CaseResult.diff()`` renders them with the sources, attempts and verifier checks.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from .._clock import fixed_clock
from .._frozen import Frozen
from ..errors import ExternalQueryError, InputError
from ..models import AnswerContract, AnswerStatus, ExternalAnswer, QuerySemantics
from ..service import ExternalQueryService
from ..settings import format_validation_error
from .world import open_world
from .world_files import WORLD_FILE

__all__ = [
    "Case",
    "CaseResult",
    "Expectation",
    "Mismatch",
    "case_summary",
    "check_answer",
    "find_case_files",
    "is_case_file",
    "load_cases",
    "run_case",
]


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.utcoffset() is None:
        raise ValueError("now needs an offset, e.g. 2026-11-30T10:00:00+08:00")
    return value


class Expectation(Frozen):
    """What a case expects of its answer; fields left out are not checked."""

    status: AnswerStatus | None = None
    reason: str | None = None
    contract: AnswerContract | None = None
    sites: tuple[str, ...] = ()
    not_sites: tuple[str, ...] = ()
    answer_contains: tuple[str, ...] = ()
    answer_excludes: tuple[str, ...] = ()
    evidence_contains: tuple[str, ...] = ()
    evidence_excludes: tuple[str, ...] = ()
    min_sources: int = Field(default=0, ge=0)


class _CaseEntry(Frozen):
    name: str = Field(min_length=1)
    question: str = Field(min_length=1)
    semantics: QuerySemantics | None = None
    world: str | None = None
    now: datetime | None = None
    markers: tuple[str, ...] = ()
    expect: Expectation = Expectation()

    _now = field_validator("now")(_aware)


class _CaseFile(Frozen):
    world: str | None = None
    now: datetime | None = None
    markers: tuple[str, ...] = ()
    case: tuple[_CaseEntry, ...] = Field(min_length=1)

    _now = field_validator("now")(_aware)


class Case(Frozen):
    """One case, with its world resolved to a directory."""

    name: str
    file: Path
    world: Path
    question: str
    semantics: QuerySemantics | None = None
    now: datetime | None = None
    markers: tuple[str, ...] = ()
    expect: Expectation = Expectation()
    #: The file as the suite names it (relative to the suite's folder); default its name.
    label: str = ""

    @property
    def id(self) -> str:
        """``<file label>::<case name>``, unique within a suite."""
        return f"{self.label or self.file.name}::{self.name}"


def load_cases(path: str | Path, *, root: str | Path | None = None) -> list[Case]:
    """The cases of one TOML file; bad input is an ``InputError`` naming the file.

    With ``root`` (the suite's folder), case ids name the file relative to it
    (``zh/weather.toml::name``), so files of the same name in two folders stay apart.
    """
    path = Path(path)
    label = ""
    if root is not None and path.resolve().is_relative_to(Path(root).resolve()):
        label = path.resolve().relative_to(Path(root).resolve()).as_posix()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{path}: {exc}") from None
    try:
        parsed = _CaseFile.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{path}: {format_validation_error(exc)}") from None
    cases = []
    names = [entry.name for entry in parsed.case]
    if len(set(names)) != len(names):
        raise InputError(f"{path}: case names must be unique within a file")
    for entry in parsed.case:
        world = entry.world or parsed.world
        if world is None:
            raise InputError(f"{path}: case {entry.name!r} names no world")
        cases.append(
            Case(
                name=entry.name,
                file=path,
                world=(path.parent / world),
                question=entry.question,
                semantics=entry.semantics,
                now=entry.now or parsed.now,
                markers=tuple(dict.fromkeys((*parsed.markers, *entry.markers))),
                expect=entry.expect,
                label=label,
            )
        )
    return cases


def is_case_file(path: Path) -> bool:
    """A ``*.toml`` file other than a world manifest whose top level has ``[[case]]``."""
    if path.suffix != ".toml" or path.name == WORLD_FILE or not path.is_file():
        return False
    try:
        return "case" in tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return True  # let loading report what is wrong with it


def find_case_files(root: str | Path) -> list[Path]:
    """Case files under ``root`` (or ``root`` itself), sorted; worlds are skipped."""
    root = Path(root)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise InputError(f"{root}: not a folder of cases")
    return sorted(path for path in root.rglob("*.toml") if is_case_file(path))


@dataclass(frozen=True)
class Mismatch:
    """One expectation an answer missed: what, expected, actual."""

    what: str
    expected: str
    actual: str


@dataclass(frozen=True)
class CaseResult:
    """One case run: the answer (None on error), what did not match, and a readable diff."""

    case: Case
    answer: ExternalAnswer | None
    mismatches: tuple[Mismatch, ...] = ()
    error: str | None = None

    @property
    def passed(self) -> bool:
        """No error and no mismatch."""
        return self.error is None and not self.mismatches

    @property
    def status(self) -> str:
        """The answer's status, or ``error`` when the case did not run to an answer."""
        return self.answer.status if self.answer is not None else "error"

    def diff(self) -> str:
        """Expected against actual, then what the answer rests on."""
        lines = [
            f"case {self.case.id}: {'passed' if self.passed else 'FAILED'}",
            f"  world: {self.case.world}",
            f"  question: {self.case.question}",
        ]
        if self.error is not None:
            lines.append(f"  error: {self.error}")
        for item in self.mismatches:
            lines += [
                f"  {item.what}:",
                f"    expected: {item.expected}",
                f"    actual:   {item.actual}",
            ]
        answer = self.answer
        if answer is None:
            return "\n".join(lines)
        lines.append(f"  actual status: {_status(answer)} · contract: {answer.answer_contract}")
        lines.append("  sources:" if answer.sources else "  sources: (none)")
        lines += [f"    - {s.site}  {s.title}  {s.url}" for s in answer.sources]
        lines.append("  attempts:")
        lines += [
            f"    - {a.adapter_id} ({a.provider_type}): {a.status}"
            + (f" {a.reason}" if a.reason else "")
            + f" · results {a.results} · pages {a.pages_fetched}/{a.pages_failed} failed"
            for a in answer.attempts
        ]
        lines.append("  verifier checks:")
        lines += [
            f"    {'✓' if c.passed else '✗'} {c.check:<9} {c.reason}"
            + (f" [{c.evidence_id}]" if c.evidence_id else "")
            + (f" {c.detail}" if c.detail else "")
            for c in answer.verifier.checks
        ]
        lines.append("  answer text:")
        lines += [f"    | {line}" for line in answer.text.splitlines()]
        return "\n".join(lines)


def _status(answer: ExternalAnswer) -> str:
    return answer.status + (f" ({answer.reason})" if answer.reason else "")


def _missing(needles: tuple[str, ...], haystacks: list[str]) -> list[str]:
    return [n for n in needles if not any(n in hay for hay in haystacks)]


def _present(needles: tuple[str, ...], haystacks: list[str]) -> list[str]:
    return [n for n in needles if any(n in hay for hay in haystacks)]


def check_answer(expect: Expectation, answer: ExternalAnswer) -> list[Mismatch]:
    """Every way ``answer`` differs from ``expect`` (empty: it meets it)."""
    found: list[Mismatch] = []

    def compare(what: str, wanted: object, got: object) -> None:
        if wanted is not None and wanted != got:
            found.append(Mismatch(what, str(wanted), str(got)))

    compare("status", expect.status, answer.status)
    compare("reason", expect.reason, answer.reason)
    compare("contract", expect.contract, answer.answer_contract)
    shown = sorted({source.site for source in answer.sources})
    admitted = sorted({item.site for item in answer.evidence})
    if missing := [site for site in expect.sites if site not in shown]:
        found.append(Mismatch("sites shown", f"includes {missing}", str(shown)))
    if present := [site for site in expect.not_sites if site in {*shown, *admitted}]:
        found.append(Mismatch("sites not shown or admitted", f"excludes {present}", str(shown)))
    if len(answer.sources) < expect.min_sources:
        found.append(
            Mismatch("sources", f"at least {expect.min_sources}", str(len(answer.sources)))
        )
    if missing := _missing(expect.answer_contains, [answer.text]):
        found.append(Mismatch("answer text", f"contains {missing}", "does not"))
    if present := _present(expect.answer_excludes, [answer.text]):
        found.append(Mismatch("answer text", f"excludes {present}", "contains them"))
    snippets = [item.snippet for item in answer.evidence]
    if missing := _missing(expect.evidence_contains, snippets):
        found.append(Mismatch("admitted evidence", f"contains {missing}", "does not"))
    if present := _present(expect.evidence_excludes, snippets):
        found.append(Mismatch("admitted evidence", f"excludes {present}", "contains them"))
    return found


def run_case(case: Case) -> CaseResult:
    """Serve the case's world, ask its question in-process, and check the answer."""
    try:
        with open_world(case.world) as world:
            now = case.now or world.now
            clock = fixed_clock(now) if now is not None else world.clock
            walks = world.recorded_walks()
            with ExternalQueryService(
                world.settings(), clock=clock, recorded_walks=walks
            ) as service:
                answer = service.answer(case.question, case.semantics)
    except ExternalQueryError as exc:
        return CaseResult(case, None, error=f"{type(exc).__name__}: {exc}")
    return CaseResult(case, answer, tuple(check_answer(case.expect, answer)))


def case_summary(result: CaseResult) -> dict[str, Any]:
    """A JSON-ready row for reports."""
    answer = result.answer
    return {
        "id": result.case.id,
        "name": result.case.name,
        "file": str(result.case.file),
        "world": str(result.case.world),
        "question": result.case.question,
        "expected": result.case.expect.model_dump(mode="json", exclude_defaults=True),
        "passed": result.passed,
        "error": result.error,
        "mismatches": [vars(item) for item in result.mismatches],
        "status": answer.status if answer else "error",
        "reason": answer.reason if answer else None,
        "contract": answer.answer_contract if answer else None,
        "text": answer.text if answer else "",
        "sources": [source.model_dump(mode="json") for source in answer.sources] if answer else [],
        "checks": [check.model_dump(mode="json") for check in answer.verifier.checks]
        if answer
        else [],
        "audit": answer.audit.explain() if answer else "",
    }
