"""discover: project provider observations into an inventory with explicit readiness.

Registry presence is inventory, not readiness: a registry row is projected
``ready=false`` whatever it claims, and so is any row missing a lifecycle step
(declared → installed → enabled → ready) or speaking another protocol. A configured
adapter's real readiness probe (``probed_rows``) is an observation: such a row may be ready.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import ConfigDict, JsonValue, StrictBool, StrictStr

from .._frozen import Frozen
from ..errors import ContractRejected, EvidenceInputError
from ..models import Readiness
from ._models import PROTOCOL, ProviderInventory, ProviderRow, parse_model

__all__ = [
    "REGISTRY_REASON",
    "connector_id",
    "discover",
    "parse_inventory",
    "probed_rows",
    "project_row",
    "registry_rows",
]

REGISTRY_REASON = "registry_presence_is_not_readiness"
_INVENTORY_KEYS = frozenset(ProviderInventory.model_fields)


class _RowInput(Frozen):
    """A caller's row as written: fields typed strictly, readiness not yet judged."""

    model_config = ConfigDict(strict=True)

    provider_id: StrictStr
    provider_kind: Literal["method", "connector"]
    protocol: StrictStr
    declared: StrictBool
    installed: StrictBool
    enabled: StrictBool
    ready: StrictBool
    unavailable_reason: StrictStr | None = None
    observed_by: Literal["caller", "probe", "gateway", "registry"] = "caller"


def _why_not_ready(row: _RowInput) -> str | None:
    if row.observed_by == "registry":
        return REGISTRY_REASON
    if row.protocol != PROTOCOL:
        return "unsupported_protocol"
    for step in ("declared", "installed", "enabled"):
        if not getattr(row, step):
            return f"not_{step}"
    if not row.ready:
        return (row.unavailable_reason or "").strip() or "not_ready"
    return None


def project_row(data: Mapping[str, Any]) -> ProviderRow:
    """One observed row → its projection (``ContractRejected('invalid_inventory')``)."""
    raw = parse_model(_RowInput, data, "invalid_inventory")
    reason = _why_not_ready(raw)
    if reason is not None and raw.ready:
        reason = f"projected_not_ready:{reason}"
    values = raw.model_dump()
    values.update(ready=reason is None, unavailable_reason=reason)
    return parse_model(ProviderRow, values, "invalid_inventory")


def parse_inventory(root: JsonValue, *, origin: str | None = None) -> tuple[ProviderRow, ...]:
    """An inventory file's root: ``{"providers": [...]}``, each row projected.

    A bare array is ``EvidenceInputError('bare_providers_array')``; another non-object
    root ``non_object_root``; a malformed row or duplicate id ``ContractRejected``.
    """
    if isinstance(root, list):
        raise EvidenceInputError(
            "bare_providers_array",
            'the inventory root is an array; write {"providers": [...]}',
            origin=origin,
        )
    if not isinstance(root, dict):
        raise EvidenceInputError(
            "non_object_root", 'the inventory root must be {"providers": [...]}', origin=origin
        )
    unknown = sorted(set(root) - _INVENTORY_KEYS)
    if unknown:
        raise ContractRejected("invalid_inventory", f"unknown keys: {', '.join(unknown)}")
    providers = root.get("providers")
    if not isinstance(providers, list):
        raise ContractRejected("invalid_inventory", "providers must be an array")
    if root.get("protocol", PROTOCOL) != PROTOCOL:
        raise ContractRejected("unsupported_protocol", f"inventory protocol is not {PROTOCOL}")
    rows: list[ProviderRow] = []
    for index, item in enumerate(providers):
        if not isinstance(item, dict):
            raise ContractRejected("invalid_inventory", f"providers[{index}] is not an object")
        rows.append(project_row(item))
    ids = [row.provider_id for row in rows]
    duplicates = sorted({item for item in ids if ids.count(item) > 1})
    if duplicates:
        raise ContractRejected("duplicate_provider_id", ", ".join(duplicates))
    return tuple(rows)


def registry_rows(
    entries: Iterable[tuple[str, Literal["method", "connector"]]],
) -> tuple[ProviderRow, ...]:
    """Rows for registered providers ``(provider_id, kind)``: declared and installed (the
    code is there), never enabled or ready on that evidence alone."""
    return tuple(
        ProviderRow(
            provider_id=provider_id,
            provider_kind=kind,
            protocol=PROTOCOL,
            declared=True,
            installed=True,
            enabled=False,
            ready=False,
            unavailable_reason=REGISTRY_REASON,
            observed_by="registry",
        )
        for provider_id, kind in entries
    )


def connector_id(name: str) -> str:
    """The provider id of a connector (an adapter kind or a configured adapter's id)."""
    return f"connector:{name}"


def probed_rows(
    readiness: Mapping[str, Readiness], *, enabled: Mapping[str, bool]
) -> tuple[ProviderRow, ...]:
    """Rows for configured adapters from their readiness probes (adapter id → result):
    declared and installed (configured, and their code loaded), ``enabled`` as configured,
    ready exactly when the probe found them ready (``observed_by: probe``)."""
    return tuple(
        project_row(
            {
                "provider_id": connector_id(adapter_id),
                "provider_kind": "connector",
                "protocol": PROTOCOL,
                "declared": True,
                "installed": True,
                "enabled": enabled.get(adapter_id, True),
                "ready": result.ready,
                "unavailable_reason": result.reason,
                "observed_by": "probe",
            }
        )
        for adapter_id, result in readiness.items()
    )


def discover(*groups: Sequence[ProviderRow]) -> ProviderInventory:
    """Merge row groups into one inventory; a later group's row replaces an earlier one
    with the same id (an observation supersedes registry presence). Sorted by id."""
    merged: dict[str, ProviderRow] = {}
    for group in groups:
        for row in group:
            merged[row.provider_id] = row
    return ProviderInventory(providers=tuple(merged[key] for key in sorted(merged)))
