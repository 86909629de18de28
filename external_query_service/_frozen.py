"""The package's one frozen pydantic base.

Results, records and settings sections are values: once built they never change, and a
field nobody declared is a mistake to report, not data to carry along. ``Frozen`` says so
once; a model that needs more (``strict=True``) adds only that to its own config, which
pydantic merges with this one.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen"]


class Frozen(BaseModel):
    """An immutable model that refuses unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")
