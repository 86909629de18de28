"""The toolkit's failures, inside the library's one error tree.

```
ExternalQueryError
└── ToolkitError                a tool could not do what was asked (``reason`` says why)
    ├── BoundaryRefused         outside the caller's bounds: an origin not allowed, a link
    │                           never observed, a symlink, a path escaping the root, a FIFO,
    │                           an existing report file
    ├── BudgetExhausted         a page, byte or file budget of the task is used up
    ├── UnsafePlatform          no O_NOFOLLOW / dir_fd opens here: workspace tools fail closed
    └── StaleState              a state_ref that is unknown, stale or already used
```

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
    reason = "boundary_refused"


class BudgetExhausted(ToolkitError):
    reason = "budget_exhausted"


class UnsafePlatform(ToolkitError):
    reason = "unsafe_platform"


class StaleState(ToolkitError):
    reason = "stale_state"
