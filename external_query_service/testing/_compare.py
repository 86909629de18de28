"""What "the same answer" means when a world is replayed.

Everything an answer holds must come back identical — status, reason, text, sources,
plan, attempts, evidence with its ids, snippets and digests, verifier checks, the audit —
except what differs between any two runs by design: how long an attempt took
(``duration_ms``) and the presenter's ``prompt_digest`` (each prompt fences evidence with
a fresh random boundary, so no evidence can guess it).
"""

from __future__ import annotations

import json
from typing import Any

from ..models import ExternalAnswer

__all__ = ["ENVELOPE_FIELDS", "PER_RUN_FIELDS", "comparable_answer"]

#: Keys whose values change from run to run on purpose; blanked before comparing.
PER_RUN_FIELDS = frozenset({"duration_ms", "prompt_digest"})
#: Content ids that bind the network envelope (policy, routing, budgets). A replay serves
#: the world on loopback, so its envelope — and these ids — differ from the recording's.
ENVELOPE_FIELDS = frozenset(
    {"plan_id", "plan_ids", "receipt_digest", "receipt_digests", "admission_id", "admission_ids"}
)


def _blank(value: Any, keys: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {key: (None if key in keys else _blank(item, keys)) for key, item in value.items()}
    if isinstance(value, list):
        return [_blank(item, keys) for item in value]
    return value


def comparable_answer(answer: ExternalAnswer, *, same_envelope: bool = True) -> dict[str, Any]:
    """The answer as JSON data with the per-run fields blanked: equal for equal runs.

    ``same_envelope=False`` also blanks the admission ids that hash the network envelope,
    for comparing a replay with the live recording it came from.
    """
    keys = PER_RUN_FIELDS if same_envelope else PER_RUN_FIELDS | ENVELOPE_FIELDS
    data: dict[str, Any] = _blank(json.loads(answer.model_dump_json()), keys)
    return data
