"""Page functions that report on the analysis worker running them. This module imports
nothing but the standard library, so what a worker has loaded is what the pool gave it."""

from __future__ import annotations

import sys

__all__ = ["loaded_modules"]


def loaded_modules() -> list[str]:
    """The modules loaded in the process running this (a worker's, through the pool)."""
    return sorted(sys.modules)
