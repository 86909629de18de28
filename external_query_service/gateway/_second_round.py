"""The second search round: when it runs, and what it searches for.

It runs when the first round's verdict names something more searching can fix: a compare
target without evidence, a part of a question asked in parts that no evidence covers (even
when the rest is answered), too few independent sources, or a disagreement no majority
settles. It never runs after a ``clarify`` (the user must answer first) or when no provider
answered at all (more queries to the same failing providers cannot help).

Its queries come from the plan's own fields, never from a list of words, and are ones the
first round did not send (the first searches the question, and the question with each
compare target):

- each compare target without evidence, with the plan's kind and time terms;
- each part no evidence covers: the question that part asks on its own
  (``text._parts.part_question``: the question with its coordination replaced by the part);
- too few sources: the plan's subject (its location, else its entities) with the kind and
  time terms;
- a disagreement: its subject (the target, else the plan's subject) with the name of the
  value disputed and the time terms.

The kind term is the plan's ``query_kind`` as words (``exchange_rate`` → ``exchange rate``),
left out for ``generic_web``, which names no subject; the time terms are the plan's range
as ISO dates. The question's other words are left out, so the round reaches pages the
question's wording missed.

Pure: no I/O.
"""

from __future__ import annotations

from .._audit import StageEvent
from ..models import ExternalQueryPlan, VerifierResult
from ..text._parts import part_question, question_parts

__all__ = ["MAX_SECOND_ROUND_QUERIES", "second_round_event", "second_round_queries"]

#: At most this many queries in the second round.
MAX_SECOND_ROUND_QUERIES = 3
_NO_SUBJECT_KINDS = frozenset({"generic_web"})
_FIXABLE = frozenset({"insufficient_sources", "conflicting_evidence"})


def second_round_queries(plan: ExternalQueryPlan, verdict: VerifierResult) -> tuple[str, ...]:
    """The queries a second round sends for ``plan`` after ``verdict``; ``()`` when no
    second round can help."""
    if verdict.status == "clarify":
        return ()
    undecided = [conflict for conflict in verdict.conflicts if not conflict.majority]
    if verdict.status == "answered" and not undecided and not verdict.missing_parts:
        return ()
    if verdict.status == "insufficient_evidence" and verdict.reason not in _FIXABLE:
        return ()
    kind = _kind_terms(plan)
    time = _time_terms(plan)
    subject = (plan.location,) if plan.location else plan.entities
    queries = [_join(target, *kind, *time) for target in verdict.missing_targets]
    parts = question_parts(plan.question) if verdict.missing_parts else ()
    queries += [
        part_question(plan.question, parts, part)
        for part in parts
        if part.text in verdict.missing_parts
    ]
    if verdict.reason == "insufficient_sources" and not queries and subject:
        queries.append(_join(*subject, *kind, *time))
    for conflict in undecided:
        about = (conflict.target,) if conflict.target else subject
        # A slot's subject is the shared words around it (``共有…个座位``): words, not marks.
        disputed = conflict.subject.replace("_", " ").replace("…", " ")
        queries.append(_join(*about, disputed, *time))
    sent = {query.casefold() for query in plan.search_queries}
    fresh = [query for query in dict.fromkeys(queries) if query and query.casefold() not in sent]
    return tuple(fresh[:MAX_SECOND_ROUND_QUERIES])


def _kind_terms(plan: ExternalQueryPlan) -> tuple[str, ...]:
    if plan.query_kind in _NO_SUBJECT_KINDS:
        return ()
    return (plan.query_kind.replace("_", " "),)


def _time_terms(plan: ExternalQueryPlan) -> tuple[str, ...]:
    if plan.time_range is None:
        return ()
    start, end = plan.time_range.start.isoformat(), plan.time_range.end.isoformat()
    return (start,) if start == end else (start, end)


def _join(*terms: str | None) -> str:
    return " ".join(term.strip() for term in terms if term and term.strip())


def second_round_event(queries: tuple[str, ...], first: VerifierResult) -> StageEvent:
    """The gateway's audit record of a second round: its queries and the first verdict
    that called for it."""
    return StageEvent(
        "gateway",
        "second_round",
        {
            "round": 2,
            "queries": list(queries),
            "after": {
                "status": first.status,
                "reason": first.reason,
                "missing_targets": list(first.missing_targets),
                "missing_parts": list(first.missing_parts),
                "conflicts": len(first.conflicts),
            },
        },
    )
