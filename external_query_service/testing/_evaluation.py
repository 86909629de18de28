"""Run a suite of cases and score it.

- **passed**: cases whose answer met every expectation.
- **status confusion**: expected status (rows) against actual status (columns); a case
  that raised counts as ``error``.
- **truthfulness** = (answered-and-correct − answered-but-unsupported) / cases: an answer
  given where the case expected none (the evidence does not support one) costs as much as
  a correct answer earns. Ranges from -1 to 1.
- **citation precision** = displayed sources that are admitted evidence / displayed
  sources, over all answers (None when nothing was displayed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._cases import Case, CaseResult, case_summary, run_case

__all__ = ["STATUSES", "EvalReport", "Scores", "evaluate", "score"]

log = logging.getLogger("external_query_service.testing")

STATUSES = ("answered", "insufficient_evidence", "clarify")
Progress = Callable[[int, int, CaseResult], None]


@dataclass(frozen=True)
class Scores:
    """A suite's figures: pass counts, the status confusion matrix, truthfulness and
    citation precision."""

    total: int
    passed: int
    errors: int
    #: expected status → actual status → count (expected "any" when a case names none).
    confusion: dict[str, dict[str, int]]
    answered_correct: int
    answered_unsupported: int
    displayed_sources: int
    displayed_admitted: int

    @property
    def failed(self) -> int:
        """Cases that did not pass."""
        return self.total - self.passed

    @property
    def truthfulness(self) -> float:
        """(correct answers - unsupported answers) / cases; 0 for an empty suite."""
        if not self.total:
            return 0.0
        return (self.answered_correct - self.answered_unsupported) / self.total

    @property
    def citation_precision(self) -> float | None:
        """Share of displayed sources that were admitted evidence; None when none was shown."""
        if not self.displayed_sources:
            return None
        return self.displayed_admitted / self.displayed_sources

    def as_dict(self) -> dict[str, Any]:
        """The scores as JSON-ready data (ratios rounded to four places)."""
        return {
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "confusion": self.confusion,
            "answered_correct": self.answered_correct,
            "answered_unsupported": self.answered_unsupported,
            "truthfulness": round(self.truthfulness, 4),
            "displayed_sources": self.displayed_sources,
            "displayed_admitted": self.displayed_admitted,
            "citation_precision": None
            if self.citation_precision is None
            else round(self.citation_precision, 4),
        }


@dataclass(frozen=True)
class EvalReport:
    """Every case result of a suite and the suite's scores."""

    results: tuple[CaseResult, ...]
    scores: Scores

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data: the scores and one summary per case."""
        return {
            "scores": self.scores.as_dict(),
            "cases": [case_summary(result) for result in self.results],
        }


def score(results: Sequence[CaseResult]) -> Scores:
    """The scores of ``results``."""
    confusion: dict[str, dict[str, int]] = {}
    answered_correct = answered_unsupported = shown = admitted_shown = 0
    for result in results:
        expected = result.case.expect.status or "any"
        row = confusion.setdefault(expected, {})
        row[result.status] = row.get(result.status, 0) + 1
        answer = result.answer
        if answer is None:
            continue
        admitted_urls = {item.url for item in answer.evidence}
        shown += len(answer.sources)
        admitted_shown += sum(1 for source in answer.sources if source.url in admitted_urls)
        if answer.status != "answered":
            continue
        if expected not in ("answered", "any"):
            answered_unsupported += 1
        elif result.passed:
            answered_correct += 1
    return Scores(
        total=len(results),
        passed=sum(1 for result in results if result.passed),
        errors=sum(1 for result in results if result.error is not None),
        confusion=confusion,
        answered_correct=answered_correct,
        answered_unsupported=answered_unsupported,
        displayed_sources=shown,
        displayed_admitted=admitted_shown,
    )


def _safe_run(case: Case) -> CaseResult:
    try:
        return run_case(case)
    except Exception as exc:  # one broken case must not end the suite
        log.exception("case %s crashed", case.id)
        return CaseResult(case, None, error=f"internal error: {type(exc).__name__}: {exc}")


def evaluate(cases: Sequence[Case], *, progress: Progress | None = None) -> EvalReport:
    """Run every case in order (each against its own world) and score the suite."""
    results = []
    for number, case in enumerate(cases, start=1):
        result = _safe_run(case)
        results.append(result)
        if progress is not None:
            progress(number, len(cases), result)
    return EvalReport(tuple(results), score(results))
