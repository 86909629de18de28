"""The answer chain's browser: one fresh session per question, at most ``[browser]
max_pages`` renderings in it, and the rule for which fetched pages are rendered.

The service opens a ``QuestionBrowser`` around each question's gather when ``[browser]
mode`` is not ``off`` and sets ``question_browser`` to it (``browsing``); the page walk
(``adapters/_pages.py``) asks ``wants_rendering`` about each page it read and renders the
ones it names. The session (a browser context: cookies, storage) is made on the first
rendering and closed when the question ends, so nothing is carried between questions.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Final

from ..errors import RenderFailed
from ..net._fetch import FetchedPage
from ..settings import BrowserMode
from ._provider import BrowserProvider, BrowserSession, Rendering

__all__ = [
    "FALLBACK_REASONS",
    "QuestionBrowser",
    "browsing",
    "question_browser",
    "wants_rendering",
]

#: Extraction failures that a rendering may cure: the page's text is written by its scripts.
FALLBACK_REASONS: Final = frozenset({"no_main_text", "too_short"})
_HTML_TYPES: Final = frozenset({"text/html", "application/xhtml+xml"})
_SCRIPT = re.compile(rb"<script[\s>]", re.IGNORECASE)

#: The running question's browser; None: no rendering (``mode = "off"``, or no service).
question_browser: ContextVar[QuestionBrowser | None] = ContextVar("question_browser", default=None)


def wants_rendering(mode: BrowserMode, page: FetchedPage, failure: str | None) -> str | None:
    """Why ``page`` should be rendered, or None: ``always`` for every HTML page in that
    mode; ``fallback:<reason>`` in ``fallback`` mode for an HTML page that carries scripts
    and whose fetched body gave no main text or too little (``failure``)."""
    if page.content_type not in _HTML_TYPES or mode == "off":
        return None
    if mode == "always":
        return "always"
    if failure in FALLBACK_REASONS and _SCRIPT.search(page.body):
        return f"fallback:{failure}"
    return None


class QuestionBrowser:
    """One question's renderings (module docstring)."""

    def __init__(self, provider: BrowserProvider) -> None:
        self.provider = provider
        self.mode: BrowserMode = provider.settings.mode
        self._session: BrowserSession | None = None
        self.renderings = 0

    async def render(self, url: str, *, deadline: float | None) -> Rendering:
        """Render ``url`` in the question's session, by ``deadline`` (event-loop time).
        ``RenderFailed`` ``render_budget`` once ``max_pages`` pages were rendered."""
        if self.renderings >= self.provider.settings.max_pages:
            raise RenderFailed(url, reason="render_budget")
        self.renderings += 1
        try:
            # The browser's start (the first question's) counts against the deadline too.
            async with asyncio.timeout_at(deadline):
                if self._session is None:
                    self._session = await self.provider.session()
                return await self._session.render(url, deadline=deadline)
        except TimeoutError:
            raise RenderFailed(url, reason="render_timeout") from None

    async def close(self) -> None:
        """Close the question's session (every cookie and tab of it)."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


@contextlib.asynccontextmanager
async def browsing(provider: BrowserProvider) -> AsyncIterator[None]:
    """One question's own browser session, set as ``question_browser`` while the block
    runs, and closed as it ends: nothing is carried to the next question."""
    visit = QuestionBrowser(provider)
    token = question_browser.set(visit)
    try:
        yield
    finally:
        question_browser.reset(token)
        await visit.close()
