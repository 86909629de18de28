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

from .._frozen import Frozen

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
    #: The option holding the command of an MCP server the adapter starts over stdio: a
    #: world replaces it with its own tool server, which plays the ``[[tools]]`` calls it
    #: holds, and a recording files every call the adapter made as ``[[tools]]``.
    stdio: str | None = None
    #: Options a recording keeps besides URLs, because a replay needs them (which tool to
    #: call, how to fill its arguments). Never secrets, never machine paths.
    keep: tuple[str, ...] = ()
    #: The option naming the environment variable an API key is read from. A replayed
    #: world points it at a placeholder variable of its own (replies ignore keys).
    key_env: str | None = None

    @property
    def search_url(self) -> str | None:
        """The search API's base URL, when the adapter has one and it is set."""
        return self.urls.get(self.search) if self.search is not None else None


class AdapterOptions(Frozen):
    """No options. Subclasses add fields; unknown keys are errors."""

    def endpoints(self) -> Endpoints | None:
        """Where the adapter reaches outside with these options. Default: nowhere (no URL
        option). None: the adapter reads something local (a folder) that a world cannot
        play and a recording must not keep, so it is left out of both."""
        return Endpoints()
