"""The browser as the toolkit web tools' page source (``source = "browser"`` in a task file).

``BrowserPages`` offers the one call the web tools make of a fetcher (``fetch(url,
allow_redirect=...)``) and answers it with the page as the browser shows it: the DOM after
its scripts ran, as HTML. Whose tabs are whose:

- a caller that names a session and a tab (``session=``, ``tab=``) has every page rendered
  in that tab; it is reused from page to page and never closed here (it is the caller's);
- a caller that names only a session gets a tab of the toolkit's own in it, closed by
  ``aclose`` (the session and its other tabs stay the caller's);
- a caller that names neither gets a session of the toolkit's own, closed by ``aclose``.

``allow_redirect`` (the web tools' origin rule) is asked about every URL the tab's main
frame is sent to other than the one asked for, before it is requested.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from ..errors import FetchError, RenderFailed, UnsafeURL
from ..net._fetch import FetchedPage
from ..settings import BrowserSettings, NetworkSettings
from ._provider import BrowserProvider, BrowserSession

__all__ = ["BrowserPages"]

_TAB_NUMBERS = itertools.count(1)


class BrowserPages:
    """Pages rendered by ``provider`` for the web tools (module docstring). ``provider``
    None: one of its own on ``network`` and ``settings``, closed by ``aclose``."""

    def __init__(
        self,
        provider: BrowserProvider | None = None,
        *,
        session: str | None = None,
        tab: str | None = None,
        network: NetworkSettings | None = None,
        settings: BrowserSettings | None = None,
    ) -> None:
        if tab is not None and session is None:
            raise ValueError("a tab is named within a session: give session= too")
        self._owns_provider = provider is None
        self.provider = provider or BrowserProvider(
            settings or BrowserSettings(), network or NetworkSettings()
        )
        self._session_name = session
        self._caller_tab = tab
        self._own_tab = None if tab is not None else f"toolkit-{next(_TAB_NUMBERS)}"
        self._session: BrowserSession | None = None

    async def fetch(
        self,
        url: str,
        *,
        allow_redirect: Callable[[str], bool] | None = None,
        deadline: float | None = None,
    ) -> FetchedPage:
        """``url`` rendered in this source's tab. ``UnsafeURL`` when the tab was sent
        somewhere ``allow_redirect`` refuses; ``RenderFailed`` when it could not render."""
        session = await self._opened()
        tab = self._caller_tab or self._own_tab
        try:
            rendering = await session.render(
                url, deadline=deadline, tab=tab, allow_navigation=allow_redirect
            )
        except RenderFailed as exc:
            if exc.reason == "navigation_refused":
                raise UnsafeURL(url, f"redirect to {exc.detail} refused by the caller") from None
            raise FetchError(url, exc.detail, reason=exc.reason) from None
        return rendering.page

    async def _opened(self) -> BrowserSession:
        if self._session is None:
            self._session = await self.provider.session(self._session_name)
        return self._session

    async def aclose(self) -> None:
        """Close what this source opened: its own tab, or its own session; and its own
        provider. The caller's session and tab stay open."""
        session, self._session = self._session, None
        if session is not None:
            if self._session_name is None:
                await session.close()
            elif self._own_tab is not None:
                await session.close_tab(self._own_tab)
        if self._owns_provider:
            await self.provider.aclose()
