"""What the HTTP routes take and give, as models (they are the OpenAPI document too)."""

from __future__ import annotations

from pydantic import Field, JsonValue

from .._frozen import Frozen
from ..models import ExternalAnswer, QuerySemantics, Readiness
from ..service import MAX_QUESTION_CHARS

__all__ = [
    "AnswerRequest",
    "ErrorBody",
    "ErrorDetail",
    "Health",
    "ReadinessReport",
    "ServedAnswer",
]


class AnswerRequest(Frozen):
    """A question and, optionally, what the host already knows about it. The question's
    own rules (not empty, at most 20,000 characters) are the service's."""

    question: str = Field(
        description="The question, as the user asked it.",
        # The service's own rules, stated for clients; it checks them itself (after
        # stripping white space) and answers 422 with its reason (empty_question ...).
        json_schema_extra={"minLength": 1, "maxLength": MAX_QUESTION_CHARS, "pattern": r"\S"},
    )
    semantics: QuerySemantics | None = Field(
        default=None,
        description="Optional: what the host already knows (query_kind, location, entities, "
        "time_range ...). Each field given fixes that part of the plan.",
    )
    stream: bool = Field(
        default=False,
        description="Answer with Server-Sent Events as the chain works (plan, attempt, "
        "verified, then answer or error); the same as Accept: text/event-stream.",
    )
    bundle: bool = Field(
        default=False,
        description="Also return the answer's bundle (`bundle`): the portable, "
        "content-addressed record that POST /v1/verify and `external-query verify` check.",
    )


class ServedAnswer(ExternalAnswer):
    """The answer exactly as ``external-query ask --format json`` prints it, plus the
    session a follow-up continues."""

    session_id: str = Field(
        description="Pass to POST /v1/sessions/{session_id}/follow-up to continue."
    )
    # Named "bundle" on the wire; the attribute keeps ExternalAnswer.bundle() its method.
    served_bundle: dict[str, JsonValue] | None = Field(
        default=None,
        alias="bundle",
        description='The answer bundle, when the request asked for it ("bundle": true); '
        "see docs/architecture/bundles.md.",
    )


class ErrorDetail(Frozen):
    """Why a request failed: a reason code and one line for a reader."""

    reason: str = Field(description="A stable code: invalid_question, malformed_json ...")
    message: str = Field(description="One line for a person.")


class ErrorBody(Frozen):
    """Every 4xx and 5xx the service itself answers."""

    error: ErrorDetail


class ReadinessReport(Frozen):
    """Ready when at least one adapter is and the configured ledger answers. The shared
    cache is reported but does not decide: without it answers go on, fetching directly."""

    ready: bool
    adapters: dict[str, Readiness]
    ledger: Readiness | None = Field(
        default=None, description="The ledger file or database; null when none is configured."
    )
    cache: Readiness | None = Field(
        default=None, description="The shared cache ([cache] url); null when none is set."
    )


class Health(Frozen):
    """The process answers; how many questions it works on and holds in line."""

    status: str = "ok"
    questions_active: int
    questions_waiting: int
    pid: int = Field(description="The worker process that answered.")
