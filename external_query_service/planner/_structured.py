"""The planner: question + upstream ``query_semantics`` → ``ExternalQueryPlan``.

An optional structured planner (any callable, sync or async, returning JSON text or a
mapping — typically an LLM) proposes a plan that the plan model validates; the host's
``query_semantics`` win where they disagree. When there is no structured planner or it
fails, the fallback is conservative: it maps upstream structured fields only, and
otherwise plans ``generic_web`` / ``summary_with_sources`` / ``[question]``. Nothing here
reads the question's words: no regex, keyword or entity list guesses kind, time or place.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import ValidationError

from .._lazy import renamed
from ..models import (
    STRUCTURED_FACT_KINDS,
    AnswerContract,
    ExternalQueryPlan,
    PlannerResult,
    PlannerSource,
    QuerySemantics,
)
from ..settings import format_validation_error
from ..text._language import detect_language

__all__ = [
    "Planner",
    "PlannerResult",
    "StructuredPlanner",
    "default_contract",
]

#: A structured planner proposes plan fields as JSON text or a mapping.
StructuredPlanner = Callable[
    [str, QuerySemantics | None],
    "str | Mapping[str, Any] | Awaitable[str | Mapping[str, Any]]",
]

#: Fields a structured planner may propose; the question and provenance are ours.
_PROPOSABLE = frozenset(QuerySemantics.model_fields)
_MAX_FOLLOW_UP_QUERIES = 3


def default_contract(query_kind: str, compare_targets: tuple[str, ...]) -> AnswerContract:
    """The contract implied by structured fields when none is given (never by the question)."""
    if compare_targets:
        return "compare_with_sources"
    if query_kind in STRUCTURED_FACT_KINDS:
        return "direct_fact"
    return "summary_with_sources"


def _search_queries(question: str, fields: QuerySemantics) -> tuple[str, ...]:
    if fields.search_queries:
        return fields.search_queries
    # One query per compare target helps every target find its own sources; the
    # targets come from structured fields, never from parsing the question.
    return (question, *(f"{question} {target}" for target in fields.compare_targets))


def _plan_from_fields(
    question: str, fields: QuerySemantics, source: PlannerSource
) -> ExternalQueryPlan:
    kind = fields.query_kind or "generic_web"
    return ExternalQueryPlan(
        question=question,
        query_kind=kind,
        answer_contract=fields.answer_contract or default_contract(kind, fields.compare_targets),
        search_queries=_search_queries(question, fields),
        entities=fields.entities,
        compare_targets=fields.compare_targets,
        location=fields.location,
        time_range=fields.time_range,
        freshness_required=bool(fields.freshness_required),
        # The host's tag wins; else the question's script decides (never its words).
        language=fields.language or detect_language(question),
        asked_value=fields.asked_value,
        planner_source=source,
    )


def _merge(proposed: QuerySemantics, upstream: QuerySemantics | None) -> QuerySemantics:
    """Upstream fields that are set win over the proposal."""
    if upstream is None:
        return proposed
    # Validated again (``model_copy(update=...)`` would not), so nested fields stay models.
    return QuerySemantics.model_validate(
        {
            **proposed.model_dump(exclude_unset=True),
            **upstream.model_dump(exclude_unset=True, exclude_defaults=True),
        }
    )


def _has_fields(semantics: QuerySemantics | None) -> bool:
    return semantics is not None and bool(
        semantics.model_dump(exclude_unset=True, exclude_defaults=True)
    )


class Planner:
    """Plans a question. ``structured`` is optional; without it the fallback plans."""

    def __init__(self, structured: StructuredPlanner | None = None) -> None:
        self.structured = structured

    async def plan(self, question: str, semantics: QuerySemantics | None = None) -> PlannerResult:
        """The plan for ``question``: from the structured planner merged with ``semantics``
        (which win), or the fallback with the reason the structured planner was not used."""
        question = question.strip()
        if self.structured is None:
            return PlannerResult(
                plan=self._fallback(question, semantics), fallback_reason="no structured planner"
            )
        try:
            proposed = await self._propose(question, semantics)
        except Exception as exc:  # any planner failure falls back; the reason is audited
            return PlannerResult(
                plan=self._fallback(question, semantics), fallback_reason=_describe(exc)
            )
        merged = _merge(proposed, semantics)
        return PlannerResult(plan=_plan_from_fields(question, merged, "structured"))

    def plan_follow_up(
        self,
        question: str,
        previous: ExternalQueryPlan,
        semantics: QuerySemantics | None = None,
    ) -> PlannerResult:
        """Continue verifying: keep the earlier targets, time range and contract."""
        question = question.strip()
        carried = QuerySemantics(
            query_kind=previous.query_kind,
            answer_contract=previous.answer_contract,
            location=previous.location,
            entities=previous.entities,
            compare_targets=previous.compare_targets,
            time_range=previous.time_range,
            freshness_required=previous.freshness_required,
            language=previous.language,
            search_queries=(question, *previous.search_queries)[:_MAX_FOLLOW_UP_QUERIES],
            asked_value=previous.asked_value,
        )
        merged = _merge(carried, semantics)
        return PlannerResult(plan=_plan_from_fields(question, merged, "follow_up"))

    def _fallback(self, question: str, semantics: QuerySemantics | None) -> ExternalQueryPlan:
        if _has_fields(semantics):
            assert semantics is not None
            return _plan_from_fields(question, semantics, "upstream_semantics")
        return _plan_from_fields(question, QuerySemantics(), "fallback")

    async def _propose(self, question: str, semantics: QuerySemantics | None) -> QuerySemantics:
        assert self.structured is not None
        raw: Any = self.structured(question, semantics)
        if inspect.isawaitable(raw):
            raw = await raw
        if isinstance(raw, str | bytes):
            raw = json.loads(raw)
        if not isinstance(raw, Mapping):
            raise ValueError(f"structured planner returned {type(raw).__name__}, not an object")
        unknown = sorted(set(raw) - _PROPOSABLE)
        if unknown:
            raise ValueError(f"structured planner proposed unknown fields: {', '.join(unknown)}")
        return QuerySemantics.model_validate(dict(raw))


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return f"structured plan invalid: {format_validation_error(exc)}"
    if isinstance(exc, json.JSONDecodeError):
        return f"structured plan is not JSON: {exc.msg}"
    return f"structured planner failed: {type(exc).__name__}: {exc}"


#: The old class name, kept for one release (a ``DeprecationWarning`` on use).
__getattr__ = renamed(__name__, {"ExternalQueryPlanner": "Planner"})
