"""retire: re-validate the complete admission, then decide whether its evidence retires.

A rejection retires at once. An admission retires only when every admitted source has
been read back downstream; a downstream source that states its lineage (admission id,
content digest) counts only when that lineage matches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._admit import verify_admission
from ._models import Admission, DownstreamSource, Retirement

__all__ = ["retire", "retire_built"]


def retire(
    admission: Mapping[str, Any] | Admission,
    downstream: Iterable[DownstreamSource | str],
) -> Retirement:
    """Retirement readiness. ``downstream`` items are refs or ``DownstreamSource``s."""
    return retire_built(verify_admission(admission), downstream)


def retire_built(checked: Admission, downstream: Iterable[DownstreamSource | str]) -> Retirement:
    """``retire`` for an admission the caller has just made (``decide``, ``decide_built``):
    not re-validated and re-hashed. ``retire`` is for presented admissions."""
    seen: set[str] = set()
    reasons: list[str] = []
    expected = {item.source_ref: item.content_digest for item in checked.admitted_sources}
    for item in downstream:
        source = item if isinstance(item, DownstreamSource) else DownstreamSource(source_ref=item)
        if source.source_ref not in expected:
            continue
        if source.admission_id not in (None, checked.admission_id) or source.content_digest not in (
            None,
            expected[source.source_ref],
        ):
            reasons.append(f"lineage_mismatch:{source.source_ref}")
            continue
        seen.add(source.source_ref)
    admitted = tuple(sorted(expected))
    missing = tuple(ref for ref in admitted if ref not in seen)
    if checked.decision == "reject":
        reasons = ["rejected_retires_immediately"]
        ready = True
    else:
        reasons.extend(f"not_read_back:{ref}" for ref in missing)
        ready = not missing
        if ready:
            reasons.append("all_admitted_sources_read_back")
    return Retirement(
        admission_id=checked.admission_id,
        decision=checked.decision,
        ready=ready,
        state="retired" if ready else "retained",
        reasons=tuple(dict.fromkeys(reasons)),
        admitted_source_refs=admitted,
        read_back_source_refs=tuple(sorted(seen)),
        missing_source_refs=missing if checked.decision == "admit" else (),
    )
