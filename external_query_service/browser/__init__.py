"""Pages as a browser shows them: a headless Chromium (``provider.py``) whose every request
goes through the guarded fetcher, and the answer chain's use of it (``chain.py``).

Needs the ``[browser]`` extra (Playwright) and a system Chromium; nothing here imports
Playwright until a page is rendered, and with ``[browser] mode = "off"`` nothing is started.
"""

from __future__ import annotations

from ._chain import QuestionBrowser, browsing, question_browser, wants_rendering
from ._provider import BrowserProvider, BrowserSession, Rendering, find_executable

__all__ = [
    "BrowserProvider",
    "BrowserSession",
    "QuestionBrowser",
    "Rendering",
    "browsing",
    "find_executable",
    "question_browser",
    "wants_rendering",
]
