"""What a question must be before it is answered: its text checked, the host's semantics
validated. ``service.py`` checks every question with these; a server or a CLI checks a request
with them before it starts answering."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from .errors import InvalidQuery
from .models import QuerySemantics
from .settings import format_validation_error

__all__ = ["MAX_QUESTION_CHARS", "SemanticsInput", "check_question", "coerce_semantics"]

#: The longest question ``answer()`` takes, in characters (after stripping white space).
MAX_QUESTION_CHARS = 20_000

SemanticsInput = QuerySemantics | Mapping[str, Any] | None


def coerce_semantics(value: SemanticsInput) -> QuerySemantics | None:
    """Validate host-provided semantics; bad input is an ``InvalidQuery`` with one line."""
    if value is None or isinstance(value, QuerySemantics):
        return value
    if not isinstance(value, Mapping):
        raise InvalidQuery(
            f"query_semantics must be an object, not {type(value).__name__}",
            reason="invalid_semantics",
        )
    try:
        return QuerySemantics.model_validate(dict(value))
    except ValidationError as exc:
        raise InvalidQuery(
            f"query_semantics: {format_validation_error(exc)}", reason="invalid_semantics"
        ) from None


def check_question(question: str) -> str:
    """``question`` stripped of surrounding white space; an ``InvalidQuery`` when it is not
    text, empty, too long, or not valid Unicode."""
    if not isinstance(question, str):
        raise InvalidQuery(
            f"the question must be text, not {type(question).__name__}", reason="invalid_question"
        )
    text = question.strip()
    if not text:
        raise InvalidQuery("the question is empty", reason="empty_question")
    if len(text) > MAX_QUESTION_CHARS:
        raise InvalidQuery(
            f"the question is {len(text):,} characters long; the limit is {MAX_QUESTION_CHARS:,}",
            reason="question_too_long",
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no digest or ledger record can hold it
        raise InvalidQuery(
            "the question holds characters that are not valid Unicode text",
            reason="invalid_question",
        ) from None
    return text
