"""plan: bind a normalized request to exactly one ready provider, content-addressed.

``request_id`` = id of the request fields; ``plan_id`` = id of the whole plan without
``plan_id`` (request, candidate inventory, preference, selection, envelope). No clock
value enters either. ``verify_plan`` re-hashes a presented plan and rebuilds it from its
own inputs, so an edited plan is refused even when its id was recomputed.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from ..errors import ContractRejected, EvidenceInputError
from ._canonical import check_hashable, content_id
from ._models import (
    SCHEMA_REQUEST,
    EvidencePlan,
    EvidenceRequest,
    ProviderRow,
    ProviderSelection,
    parse_model,
)

__all__ = ["build_plan", "build_request", "normalize_one_line", "plan_id_of", "verify_plan"]


# Not ``text._extract.normalize_text``: that one keeps line breaks, because a page's text is
# quoted line by line; a request field is hashed, so every whitespace run, newlines
# included, becomes one space and the field is one line.
def normalize_one_line(value: str) -> str:
    """NFC, trimmed, inner whitespace runs (newlines included) collapsed to one space."""
    return " ".join(unicodedata.normalize("NFC", value).split())


def _request_fields(
    objective: str, user_activity: str, decision: str, evidence_kinds: Iterable[str]
) -> dict[str, Any]:
    kinds = sorted({normalize_one_line(kind) for kind in evidence_kinds} - {""})
    fields: dict[str, Any] = {
        "schema_version": SCHEMA_REQUEST,
        "objective": normalize_one_line(objective),
        "user_activity": normalize_one_line(user_activity),
        "decision": normalize_one_line(decision),
        "evidence_kinds": kinds,
    }
    for name in ("objective", "user_activity", "decision"):
        if not fields[name]:
            raise ContractRejected(f"empty_{name}", f"the request needs a {name}")
    if not kinds:
        raise ContractRejected("missing_evidence_kind", "name at least one evidence kind")
    if any(any(char.isspace() for char in kind) for kind in kinds):
        raise ContractRejected("invalid_evidence_kind", "evidence kinds are single tokens")
    return fields


def build_request(
    objective: str, user_activity: str, decision: str, evidence_kinds: Iterable[str]
) -> EvidenceRequest:
    """The normalized request (evidence kinds deduplicated and sorted) and its id."""
    fields = _request_fields(objective, user_activity, decision, evidence_kinds)
    return parse_model(
        EvidenceRequest, {**fields, "request_id": content_id(fields)}, "invalid_request"
    )


def _select(candidates: Sequence[ProviderRow], preferred: str | None) -> ProviderSelection:
    if preferred is not None:
        row = next((item for item in candidates if item.provider_id == preferred), None)
        if row is None:
            raise ContractRejected("preferred_provider_unknown", preferred)
        if not row.ready:
            raise ContractRejected(
                "preferred_provider_not_ready", f"{preferred}: {row.unavailable_reason}"
            )
        return ProviderSelection(
            provider_id=row.provider_id, provider_kind=row.provider_kind, selected_by="preferred"
        )
    ready = [row for row in candidates if row.ready]
    if not ready:
        raise ContractRejected(
            "no_ready_provider", "no candidate is declared, installed, enabled and ready"
        )
    if len(ready) > 1:
        # Choosing among several ready providers is the caller's decision, not ours.
        names = ", ".join(row.provider_id for row in ready)
        raise ContractRejected("several_ready_providers", f"{names}: pass a preferred id")
    return ProviderSelection(
        provider_id=ready[0].provider_id,
        provider_kind=ready[0].provider_kind,
        selected_by="only_ready",
    )


def _plain_json(value: Mapping[str, Any]) -> dict[str, JsonValue]:
    try:
        check_hashable(value, where="envelope")
    except EvidenceInputError as exc:
        raise ContractRejected(exc.reason, str(exc)) from None
    # Tuples become lists, so the envelope hashes the same after a JSON round trip.
    plain: dict[str, JsonValue] = json.loads(json.dumps(value, ensure_ascii=False))
    return plain


def plan_id_of(plan: EvidencePlan) -> str:
    """The content id of ``plan``: its canonical JSON without ``plan_id``."""
    return content_id(plan.model_dump(mode="json", exclude={"plan_id"}))


def build_plan(
    request: EvidenceRequest,
    candidates: Sequence[ProviderRow],
    *,
    preferred_provider_id: str | None = None,
    envelope: Mapping[str, Any] | None = None,
) -> EvidencePlan:
    """Select one ready candidate (the preferred one, else the only ready one) and address
    the result. Rejections: ``preferred_provider_unknown``, ``preferred_provider_not_ready``,
    ``no_ready_provider``, ``several_ready_providers``, ``duplicate_provider_id``."""
    ids = [row.provider_id for row in candidates]
    if len(set(ids)) != len(ids):
        raise ContractRejected("duplicate_provider_id", "candidate ids must be unique")
    ordered = tuple(sorted(candidates, key=lambda row: row.provider_id))
    selection = _select(ordered, preferred_provider_id)
    body: dict[str, Any] = {
        "request": request.model_dump(mode="json"),
        "candidates": [row.model_dump(mode="json") for row in ordered],
        "preferred_provider_id": preferred_provider_id,
        "selected_provider": selection.model_dump(mode="json"),
        "envelope": _plain_json(envelope or {}),
    }
    draft = parse_model(EvidencePlan, {**body, "plan_id": "sha256:" + "0" * 64}, "invalid_plan")
    return draft.model_copy(update={"plan_id": plan_id_of(draft)})


def verify_plan(data: Mapping[str, Any] | EvidencePlan) -> EvidencePlan:
    """A presented plan, re-hashed and rebuilt. Rejections: ``invalid_plan`` (shape),
    ``request_tampered``, ``plan_tampered`` (content no longer hashes to ``plan_id``),
    ``plan_not_reproducible`` (hashes, but the rules would not have built it)."""
    plan = (
        data if isinstance(data, EvidencePlan) else parse_model(EvidencePlan, data, "invalid_plan")
    )
    request = plan.request
    fields = request.model_dump(mode="json", exclude={"request_id"})
    if content_id(fields) != request.request_id:
        raise ContractRejected("request_tampered", "the request does not hash to its request_id")
    if plan_id_of(plan) != plan.plan_id:
        raise ContractRejected("plan_tampered", "the plan does not hash to its plan_id")
    try:
        rebuilt = build_plan(
            build_request(
                request.objective, request.user_activity, request.decision, request.evidence_kinds
            ),
            plan.candidates,
            preferred_provider_id=plan.preferred_provider_id,
            envelope=plan.envelope,
        )
    except ContractRejected as exc:
        raise ContractRejected("plan_not_reproducible", str(exc)) from None
    if rebuilt != plan:
        raise ContractRejected("plan_not_reproducible", "rebuilding the plan gives another plan")
    return plan
