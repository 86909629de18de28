"""``with`` and ``async with`` for the package's objects that own resources."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Closing"]


class Closing:
    """A base for classes with ``close()`` and ``aclose()``: leaving a ``with`` block calls
    the one, leaving an ``async with`` block the other."""

    def close(self) -> None:
        """Release what the object holds; idempotent."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """``close()`` from a running event loop."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
