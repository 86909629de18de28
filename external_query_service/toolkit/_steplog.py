"""``StepArchive``: a delegated run's steps, one JSON line each, appended to a file.

The file is opened once, for appending, never through a symlink and only when it is a
regular file (a FIFO would block the run). Each line goes straight to the file, unbuffered.
Before a line is written, every credential the model client would send now is replaced by
``[redacted]``: the archive holds replies and results, never the API key.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import BoundaryRefused, ToolkitError

__all__ = ["StepArchive"]

_FLAGS = (
    os.O_WRONLY
    | os.O_APPEND
    | os.O_CREAT
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class StepArchive:
    """Append-only JSON lines at ``path``; ``secrets`` returns the values to keep out."""

    def __init__(self, path: Path, secrets: Callable[[], tuple[str, ...]] = tuple) -> None:
        self.path = path
        self._secrets = secrets
        try:
            fd = os.open(path, _FLAGS, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise BoundaryRefused(
                    f"the archive {path} is a symlink", reason="symlink_refused"
                ) from None
            raise ToolkitError(
                f"cannot open the archive {path}: {exc.strerror}", reason="archive_unwritable"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise BoundaryRefused(
                f"the archive {path} is not a regular file", reason="not_regular_file"
            )
        self._fd: int | None = fd

    def write(self, entry: Mapping[str, Any]) -> None:
        """Append ``entry`` as one line (secrets redacted)."""
        if self._fd is None:
            raise ToolkitError("the archive is closed", reason="archive_closed")
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)
        for secret in self._secrets():
            line = line.replace(secret, "[redacted]")
        data = memoryview((line + "\n").encode("utf-8"))
        while data:
            data = data[os.write(self._fd, data) :]

    def close(self) -> None:
        """Flush and close the archive file; idempotent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StepArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
