"""Adapter options: the keys of an adapter's own ``[[adapters]]`` table, typed by the adapter.

Every adapter declares ``class Options(Adapter.Options)``; the keys beside ``kind``, ``id``
and ``enabled`` are validated by it when the service builds the adapter (an unknown key is
a ``SettingsError`` naming the adapter and the key). A field typed ``Path`` resolves
against the settings file's folder when relative. ``endpoints()`` tells test worlds and
recordings which outside origins the adapter calls, so they need not know adapter kinds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

__all__ = ["AdapterOptions", "Endpoints"]


@dataclass(frozen=True)
class Endpoints:
    """The outside origins an adapter calls with its options.

    A test world serves each URL's origin on loopback; a recording writes them (without
    their query) into the world's ``[[adapters]]`` entry, nothing else of the options.
    """

    #: Option name → base URL of an API the adapter calls (set or defaulted).
    urls: Mapping[str, str] = field(default_factory=dict)
    #: The option naming a SearXNG-compatible search API (``search?q=...&format=json`` and
    #: ``config``): a world serves its ``[[search]]`` answers there, and a recording files
    #: what it answered as ``[[search]]``. When the option is unset a world places the
    #: engine at a host of its own.
    search: str | None = None

    @property
    def search_url(self) -> str | None:
        """The search API's base URL, when the adapter has one and it is set."""
        return self.urls.get(self.search) if self.search is not None else None


class AdapterOptions(BaseModel):
    """No options. Subclasses add fields; unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def endpoints(self) -> Endpoints | None:
        """Where the adapter reaches outside with these options. Default: nowhere (no URL
        option). None: the adapter reads something local (a folder) that a world cannot
        play and a recording must not keep, so it is left out of both."""
        return Endpoints()
