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

__all__ = ["PER_RUN_FIELDS", "comparable_answer"]

#: Keys whose values change from run to run on purpose; blanked before comparing.
PER_RUN_FIELDS = frozenset({"duration_ms", "prompt_digest"})


def _blank(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: (None if key in PER_RUN_FIELDS else _blank(item)) for key, item in value.items()
        }
    if isinstance(value, list):
        return [_blank(item) for item in value]
    return value


def comparable_answer(answer: ExternalAnswer) -> dict[str, Any]:
    """The answer as JSON data with the per-run fields blanked: equal for equal runs."""
    data: dict[str, Any] = _blank(json.loads(answer.model_dump_json()))
    return data
