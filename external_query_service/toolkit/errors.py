"""The toolkit's failures: ``ToolkitError`` (a tool could not do what was asked; ``reason``
says why) and its four kinds. Their place in the library's one exception tree is drawn in
``external_query_service.errors``.

Bad task files and inputs are ``InputError``s (one line, exit code 2 in the CLI).
"""

from __future__ import annotations

from ..errors import ExternalQueryError

__all__ = ["BoundaryRefused", "BudgetExhausted", "StaleState", "ToolkitError", "UnsafePlatform"]


class ToolkitError(ExternalQueryError):
    """A tool failed; ``reason`` is a snake_case code, ``detail`` one line for a reader."""

    reason: str = "tool_failed"

    def __init__(self, detail: str, *, reason: str | None = None) -> None:
        if reason is not None:
            self.reason = reason
        self.detail = detail
        super().__init__(f"{self.reason}: {detail}")


class BoundaryRefused(ToolkitError):
    """Outside the caller's bounds: an origin not allowed, a link never observed, a symlink,
    a path escaping the root, a FIFO, an existing report file."""

    reason = "boundary_refused"


class BudgetExhausted(ToolkitError):
    """A page, byte or file budget of the task is used up."""

    reason = "budget_exhausted"


class UnsafePlatform(ToolkitError):
    """No ``O_NOFOLLOW`` / ``dir_fd`` opens on this platform: workspace tools fail closed."""

    reason = "unsafe_platform"


class StaleState(ToolkitError):
    """A ``state_ref`` that is unknown, stale or already used."""

    reason = "stale_state"
