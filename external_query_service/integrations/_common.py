"""What the LangChain and LlamaIndex integrations share, with neither framework imported.

An integration sits outside the chain: it calls ``ExternalQueryService`` and reads only the
``ExternalAnswer`` that comes back. This module holds the pieces both frameworks need — the
service an integration answers with (shared or owned), the admitted evidence a retriever may
return and the metadata each piece carries, the outcome reported when nothing may be
returned, and the typed arguments of the question-answering tool.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .._questions import SemanticsInput, coerce_semantics
from ..errors import InputError, IntegrationUnavailable, InvalidQuery
from ..execution._closing import Closing
from ..models import Evidence, ExternalAnswer, QuerySemantics
from ..server.mcp import SEMANTICS_FIELD_DESCRIPTIONS
from ..service import ExternalQueryService
from ..settings import Settings, format_validation_error

__all__ = [
    "DEFAULT_K",
    "OUTCOME_EVENT",
    "SCORE_SCALE",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "IntegrationUnavailable",
    "ServiceHandle",
    "ServiceOwner",
    "ToolArguments",
    "cited_evidence",
    "evidence_metadata",
    "merge_semantics",
    "outcome",
    "parse_tool_arguments",
    "positive_k",
    "relevance",
    "tool_arguments_model",
    "tool_text",
]

#: Documents (nodes) a retriever returns when ``k`` is not given.
DEFAULT_K = 4
#: The name of the callback event (LangChain) that carries every call's outcome.
OUTCOME_EVENT = "external_query_outcome"
TOOL_NAME = "external_query"
TOOL_DESCRIPTION = (
    "Answer a question only from external evidence (web search, fact APIs, documentation). "
    "Returns the answer with its numbered sources and a status line; when the evidence is "
    "insufficient or the question needs clarifying, it says so instead of answering. Give "
    "the question as the user asked it; fill in the other fields only when you know them."
)


def _close_owned(service: ExternalQueryService) -> None:
    # A finalizer runs wherever the collector happens to run, possibly on the service's own
    # portal thread, where close() cannot wait for that loop: close from a fresh thread then.
    if threading.current_thread() is threading.main_thread():
        service.close()
    else:
        threading.Thread(target=service.close, name="external-query-close", daemon=True).start()


class ServiceHandle:
    """The service an integration answers with.

    ``service=`` is shared: the caller made it and closes it; ``close()`` leaves it alone.
    ``settings=`` builds a service the integration owns: ``close()`` closes it, and so does
    the collector when the last integration holding this handle goes, or interpreter exit
    (``weakref.finalize`` runs at exit too). Copies of an integration share one handle.
    """

    def __init__(
        self, service: ExternalQueryService | None = None, settings: Settings | None = None
    ) -> None:
        if (service is None) == (settings is None):
            raise InputError(
                "give exactly one of service= (an ExternalQueryService you close) or "
                "settings= (a Settings; the integration then owns and closes the service)"
            )
        self._finalizer: weakref.finalize[[ExternalQueryService], ServiceHandle] | None = None
        if service is not None:
            if not isinstance(service, ExternalQueryService):
                raise InputError(
                    f"service= must be an ExternalQueryService, not {type(service).__name__}"
                )
            self.service = service
        else:
            if not isinstance(settings, Settings):
                raise InputError(f"settings= must be a Settings, not {type(settings).__name__}")
            self.service = ExternalQueryService(settings)
            self._finalizer = weakref.finalize(self, _close_owned, self.service)

    @property
    def owned(self) -> bool:
        """True when the integration built this service from settings and must close it."""
        return self._finalizer is not None

    def close(self) -> None:
        """Close an owned service (idempotent); a shared one stays open."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self.service.close()

    async def aclose(self) -> None:
        """Close an owned service's HTTP clients of the running loop, then the rest."""
        if self._finalizer is not None:
            self._finalizer.detach()
            await self.service.aclose()


class ServiceOwner(Closing):
    """``service``, ``close()``/``aclose()`` and both context managers over ``_handle``, a
    ``ServiceHandle`` the integration sets in its constructor."""

    _handle: ServiceHandle

    @property
    def service(self) -> ExternalQueryService:
        """The service this integration answers with."""
        return self._handle.service

    def close(self) -> None:
        """Close the service if this integration owns it (``settings=``); idempotent."""
        self._handle.close()

    async def aclose(self) -> None:
        """Close the service if this integration owns it (a shared one stays open)."""
        await self._handle.aclose()


def positive_k(value: object, *, name: str = "k") -> int:
    """``value`` as a number of documents: a whole number of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{name} must be a whole number of at least 1, not {value!r}")
    return value


def merge_semantics(*layers: SemanticsInput) -> QuerySemantics | None:
    """One ``QuerySemantics`` from layers, later ones winning field by field (a layer
    overrides only the fields it sets). None when no layer sets anything."""
    fields: dict[str, Any] = {}
    for layer in layers:
        semantics = coerce_semantics(layer)
        if semantics is not None:
            fields.update(semantics.model_dump(exclude_unset=True))
    return coerce_semantics(fields) if fields else None


def cited_evidence(answer: ExternalAnswer) -> tuple[Evidence, ...]:
    """The evidence a retriever may hand out: what the answer stands on, best score first.

    ``answer.evidence`` is the verifier's admitted list — evidence that passed the origin,
    target and time checks, never a rejected piece (the answer's packet refuses anything
    else). ``answer.sources`` is the reader's view of that list (display fields only: no
    ids, digests or scores), so documents come from the evidence itself.

    Admitted evidence can exist without an answer: too few independent sites
    (``insufficient_evidence / insufficient_sources``) or a question to clarify. The chain
    refused to answer from it, so a retriever returns nothing then. Ties keep the gateway's
    order (ranked adapters, then each adapter's own order).
    """
    if answer.status != "answered":
        return ()
    return tuple(sorted(answer.evidence, key=lambda item: -item.score))


#: The scale of ``Evidence.score`` (integer basis points); a document's score is a share of it.
SCORE_SCALE = 10_000


def relevance(item: Evidence) -> float:
    """``item``'s score on a 0..1 scale: for page evidence the ranker's calibrated probability
    that the passage holds the answer (scaled by the share of the plan's targets it names), so
    documents in ``cited_evidence`` order have non-increasing scores."""
    return item.score / SCORE_SCALE


def evidence_metadata(item: Evidence) -> dict[str, str | int | float | None]:
    """A document's metadata: JSON values only (dates as ISO 8601 text, the score 0..1 as
    ``relevance`` gives it), so any vector store or tracer can keep it."""
    return {
        "url": item.url,
        "site": item.site,
        "title": item.title,
        "published_at": item.published_at.isoformat() if item.published_at else None,
        "accessed_at": item.accessed_at.isoformat(),
        "evidence_id": item.evidence_id,
        "content_digest": item.content_digest,
        "adapter_id": item.adapter_id,
        "basis": item.basis,
        "score": relevance(item),
    }


def outcome(answer: ExternalAnswer, returned: int) -> dict[str, Any]:
    """What a call decided, for callbacks and events: the status and reason, the
    presenter's text (which says what is missing or what to clarify) and how many
    documents were returned."""
    return {
        "status": answer.status,
        "reason": answer.reason,
        "text": answer.text,
        "answer_contract": answer.answer_contract,
        "request_id": answer.admission.request_id,
        "returned": returned,
        "missing_targets": list(answer.verifier.missing_targets),
        "clarify_options": list(answer.verifier.clarify_options),
    }


def tool_text(answer: ExternalAnswer) -> str:
    """A tool's text: the presenter's answer (it ends with its numbered sources, or says
    why there is no answer), then the status line."""
    status = answer.status + (f" ({answer.reason})" if answer.reason else "")
    return f"{answer.text.rstrip()}\n\nstatus: {status}"


class ToolArguments(BaseModel):
    """The question; ``tool_arguments_model`` adds the semantics fields."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="The question, as the user asked it.")


@lru_cache(maxsize=32)
def tool_arguments_model(kinds: tuple[str, ...]) -> type[ToolArguments]:
    """The tool's typed arguments: ``question`` and every ``QuerySemantics`` field (all
    optional, described), ``query_kind`` limited to ``kinds``; unknown arguments refused."""
    kind_type: Any = Literal[kinds] if kinds else str
    fields: dict[str, Any] = {}
    for name, info in QuerySemantics.model_fields.items():
        annotation = (kind_type | None) if name == "query_kind" else info.annotation
        description = SEMANTICS_FIELD_DESCRIPTIONS[name]
        fields[name] = (annotation, Field(default=info.default, description=description))
    return create_model("ExternalQueryArguments", __base__=ToolArguments, **fields)


def parse_tool_arguments(
    model: type[ToolArguments], arguments: Mapping[str, Any], default: QuerySemantics | None
) -> tuple[str, QuerySemantics | None]:
    """The question and the semantics a tool call asks with: ``arguments`` checked against
    ``model`` (a bad one is an ``InvalidQuery``), the fields it sets over ``default``."""
    try:
        parsed = model.model_validate(dict(arguments))
    except ValidationError as exc:
        first = exc.errors()[0]["loc"][:1]
        raise InvalidQuery(
            f"tool arguments: {format_validation_error(exc)}",
            reason="invalid_question" if first == ("question",) else "invalid_semantics",
        ) from None
    # A field left at its default (null, []) says nothing: frameworks fill defaults in.
    fields = parsed.model_dump(exclude={"question"}, exclude_defaults=True)
    return parsed.question, merge_semantics(default, fields)
