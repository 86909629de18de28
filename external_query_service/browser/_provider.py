"""A headless Chromium whose every request is fetched by the project's guarded fetcher.

``BrowserProvider(settings, network)`` starts nothing until a page is rendered; then one
Chromium process (through Playwright, with the system Chromium as ``executable_path``: no
browser download is ever needed) serves every rendering of the service, on a loop thread of
its own, so callers on any event loop or thread share it.

Fail closed. Chromium is started with a proxy that leads nowhere (``127.0.0.1:9``, the
discard port, nothing listens) and ``--proxy-bypass-list=<-loopback>`` (Chromium bypasses
proxies for loopback by default), service workers are blocked, and every request it would
make is intercepted by Playwright routing, before any connection:

- a GET for a document, script, XHR/fetch or other text resource is fetched by a
  ``SafeFetcher`` on the service's network settings (URL gate, address policy at connect
  time on every redirect hop, byte caps, no cookies) and fulfilled from its response; a
  document whose fetch was redirected is answered with a redirect to where it ended, so the
  page's own URL is the final one;
- everything else is refused: other methods (a rendering reads, it never submits), images,
  media, fonts and stylesheets (they carry no text, and an ``<img>`` beacon is never sent),
  anything past the rendering's request or byte budget, and every fetch the policy refuses;
- WebSockets are routed too and closed unopened;
- downloads are not accepted, pop-ups are closed, dialogs dismissed, and no permission is
  granted.

So anything the routing missed would meet the dead proxy. A ``BrowserSession`` is one
browser context (its own cookies and storage); the answer chain opens a fresh one per
question (``question_session``), the toolkit a named one whose named tabs a caller may
reuse. ``close()`` closes every context, the browser and Playwright's driver, and stops the
loop thread: no child process is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._digests import sha256_digest
from ..errors import BrowserUnavailable, FetchError, RenderFailed
from ..execution._portal import Portal
from ..net._fetch import FetchedPage, SafeFetcher
from ..settings import BrowserSettings, NetworkSettings

if TYPE_CHECKING:
    from playwright.async_api import (
        Browser,
        BrowserContext,
        Page,
        Playwright,
        Request,
        Route,
        WebSocketRoute,
    )

__all__ = [
    "BROWSER_ACCEPT_TYPES",
    "DEAD_PROXY",
    "EXECUTABLES",
    "RENDERER_MAX_BYTES",
    "BrowserProvider",
    "BrowserSession",
    "Rendering",
    "find_executable",
]

T = TypeVar("T")

#: Looked up on ``PATH`` in this order when ``[browser] executable`` is not set.
EXECUTABLES: Final = ("chromium", "chromium-browser", "google-chrome")
#: Where Chromium's own connections would go: the discard port on loopback, where nothing
#: listens, so a request the routing missed fails instead of reaching anything.
DEAD_PROXY: Final = "http://127.0.0.1:9"
#: Media types a rendering's fetches accept (the resources that carry text or run code).
BROWSER_ACCEPT_TYPES: Final = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "text/plain",
        "text/javascript",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "text/ecmascript",
        "application/json",
        "application/ld+json",
        "text/xml",
        "application/xml",
    }
)
#: Resource types refused unfetched: they carry no text.
_SKIPPED_TYPES: Final = frozenset(
    {"image", "media", "font", "stylesheet", "manifest", "texttrack", "ping", "cspviolationreport"}
)
#: After the load event, how long a rendering waits for its requests to go quiet (scripts
#: that fetch their text), at most; quiet is no request in flight for ``_QUIET_S``. The
#: routing sees every request, so this needs none of Playwright's 500 ms "network idle".
_SETTLE_S: Final = 1.5
_QUIET_S: Final = 0.15
_POLL_S: Final = 0.025
_DOM_SIZE: Final = "document.documentElement ? document.documentElement.outerHTML.length : 0"
#: A renderer process may hold this much resident memory (a plain page's renderer holds
#: some 60-100 MiB, a heavy news page's some 250 MiB); past it, it is killed and the pages
#: it was rendering fail as ``render_memory``. Checked every ``_MEMORY_POLL_S`` while a
#: rendering runs, so a page allocating as fast as V8 can overshoots by about 100 MiB.
RENDERER_MAX_BYTES: Final = 384 * 1024 * 1024
_MEMORY_POLL_S: Final = 0.025
_ARGS: Final = (
    f"--proxy-server={DEAD_PROXY}",
    "--proxy-bypass-list=<-loopback>",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-features=ServiceWorker,Translate,OptimizationHints,MediaRouter",
    "--dns-prefetch-disable",
    # WebRTC would otherwise send UDP (STUN, TURN) straight to addresses a page picks, past
    # both the routing and the dead proxy: only proxied traffic is allowed (there is none
    # that works), and no local address is handed out without a permission never granted.
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--force-webrtc-ip-handling-policy",
    "--enforce-webrtc-ip-permission-check",
)


def find_executable(settings: BrowserSettings) -> str:
    """The Chromium binary: ``settings.executable`` (a path or a name on ``PATH``), else the
    first of ``EXECUTABLES`` on ``PATH``; ``BrowserUnavailable`` when there is none."""
    names = (settings.executable,) if settings.executable else EXECUTABLES
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    wanted = settings.executable or ", ".join(EXECUTABLES)
    raise BrowserUnavailable(
        f"no Chromium executable found ({wanted}); install one (apt-get install chromium) "
        "or set [browser] executable"
    )


@dataclass(frozen=True)
class Rendering:
    """A page as the browser showed it: ``page.body`` is the DOM serialized after its
    scripts ran (UTF-8 HTML), ``page.final_url`` where the tab ended up. ``requests``
    counts the requests the page made (each fetched or refused), ``refused`` the URLs
    refused (in order, at most 50 kept), ``fetched_bytes`` the bytes fetched for it."""

    page: FetchedPage
    requests: int
    refused: tuple[str, ...]
    fetched_bytes: int
    elapsed_s: float


@dataclass
class _Budget:
    """One rendering's requests and bytes, counted by its route handler."""

    max_requests: int
    max_bytes: int
    deadline: float  # loop time
    requests: int = 0
    bytes: int = 0
    refused: list[str] = field(default_factory=list)
    in_flight: int = 0
    last_activity: float = 0.0  # loop time a request last started or ended
    #: Asked about every URL the main frame is sent to, its redirect hops included.
    allow_navigation: Callable[[str], bool] | None = None
    #: The first main-frame URL ``allow_navigation`` refused.
    navigation_refused: str | None = None
    #: The provider's ``memory_kills`` when the rendering began, and whether its tab crashed.
    kills_before: int = 0
    crashed: bool = False

    def navigation_rule(self) -> Callable[[str], bool] | None:
        """``allow_navigation``, noting the first URL it refuses."""
        allow = self.allow_navigation
        if allow is None:
            return None

        def rule(url: str) -> bool:
            if allow(url):
                return True
            self.navigation_refused = self.navigation_refused or url
            return False

        return rule

    def refuse(self, url: str) -> None:
        if len(self.refused) < 50:
            self.refused.append(url)


class BrowserProvider:
    """One headless Chromium for a service (module docstring). Thread-safe: every method
    may be called from any thread or event loop; the browser runs on its own loop."""

    def __init__(
        self,
        settings: BrowserSettings,
        network: NetworkSettings,
        *,
        fetcher: SafeFetcher | None = None,
    ) -> None:
        self.settings = settings
        self._network = network
        self._fetcher = fetcher or SafeFetcher(network, accept_types=BROWSER_ACCEPT_TYPES)
        self._portal = Portal("external-query-browser")
        self._lock = threading.Lock()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._starting: asyncio.Future[Browser] | None = None
        self._sessions: dict[str, BrowserSession] = {}
        self._closed = False
        #: Renderings started so far (every session).
        self.renderings = 0
        #: Renderer processes killed for holding more than ``RENDERER_MAX_BYTES``.
        self.memory_kills = 0
        #: Renderings running now (the memory watch runs while there are any).
        self._active = 0
        self._watch: asyncio.Task[None] | None = None
        #: Marks this provider's Chromium among the processes below this one.
        self._marker = f"--external-query-browser={os.getpid()}-{id(self)}"

    # -- the browser loop -------------------------------------------------------------------
    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the browser's loop and await it from the caller's."""
        if self._closed:
            coro.close()
            raise RenderFailed("about:blank", reason="browser_closed")
        loop = self._portal.loop()
        if asyncio.get_running_loop() is loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    @property
    def started(self) -> bool:
        """Whether a Chromium process was started (and not yet closed)."""
        return self._browser is not None

    async def _browser_now(self) -> Browser:
        """The browser, started on first use (on the browser loop)."""
        if self._browser is not None:
            return self._browser
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._launch())
        return await asyncio.shield(self._starting)

    async def _launch(self) -> Browser:
        executable = find_executable(self.settings)
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            raise BrowserUnavailable(
                "the browser needs Playwright: pip install 'external_query_service[browser]'"
            ) from None
        self._playwright = await async_playwright().start()
        try:
            self._browser = await self._playwright.chromium.launch(
                executable_path=executable,
                headless=True,
                args=[*_ARGS, self._marker],
                proxy={"server": DEAD_PROXY, "bypass": "<-loopback>"},
                chromium_sandbox=os.geteuid() != 0,
            )
        except Exception as exc:
            await self._playwright.stop()
            self._playwright = None
            raise BrowserUnavailable(f"Chromium did not start ({executable}): {exc}") from None
        return self._browser

    def start(self) -> None:
        """Start Chromium now rather than with the first rendering (``BrowserUnavailable``
        when it cannot start)."""
        if self._closed:
            raise RenderFailed("about:blank", reason="browser_closed")
        self._portal.call(self._browser_now())

    # -- renderer memory ------------------------------------------------------------------
    def _rendering(self, change: int) -> None:
        """A rendering began (+1) or ended (-1): the memory watch runs while any does."""
        self._active += change
        if self._active > 0 and (self._watch is None or self._watch.done()):
            self._watch = asyncio.ensure_future(self._watch_memory())

    async def _watch_memory(self) -> None:
        """While renderings run, kill every renderer process of this browser that holds
        more than ``RENDERER_MAX_BYTES`` (its pages crash; ``render_memory``)."""
        while self._active > 0 and not self._closed:
            for pid in await asyncio.to_thread(_renderers_over, self._marker):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    self.memory_kills += 1
            await asyncio.sleep(_MEMORY_POLL_S)

    # -- sessions -------------------------------------------------------------------------
    async def session(self, name: str | None = None) -> BrowserSession:
        """The session named ``name`` (made on first use and kept until ``close``), or a new
        unnamed one the caller closes (``BrowserSession.close``)."""
        if name is not None and name in self._sessions:
            return self._sessions[name]
        made = await self._on_loop(self._new_session(name))
        if name is not None:
            made = self._sessions.setdefault(name, made)
        return made

    async def _new_session(self, name: str | None) -> BrowserSession:
        browser = await self._browser_now()
        return await _browser_step("about:blank", self._configured(browser, name))

    async def _configured(self, browser: Browser, name: str | None) -> BrowserSession:
        context = await browser.new_context(
            service_workers="block",
            accept_downloads=False,
            java_script_enabled=True,
            permissions=[],
            bypass_csp=False,
            user_agent=self._network.user_agent,
        )
        session = BrowserSession(self, context, name)
        await context.route("**/*", session._route)
        await context.route_web_socket("**/*", _refuse_socket)
        context.on("page", session._on_page)
        return session

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Close every session, the browser and Playwright's driver, and stop the loop
        thread. Idempotent; no child process is left."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._portal.running:
            self._portal.call(self._shutdown())
        self._portal.stop()

    async def aclose(self) -> None:
        """``close()`` from a running loop."""
        await asyncio.to_thread(self.close)

    async def _shutdown(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watch
        for session in list(self._sessions.values()):
            with contextlib.suppress(Exception):
                await session._context.close()
        self._sessions.clear()
        if self._starting is not None:
            with contextlib.suppress(Exception):
                await self._starting
        if self._browser is not None:
            with contextlib.suppress(Exception):
                await self._browser.close()
            self._browser = None
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None
        await self._fetcher.aclose()

    # -- what a route does -------------------------------------------------------------------
    async def _fulfil(self, route: Route, request: Request, budget: _Budget) -> None:
        """Fetch ``request`` through the guarded fetcher and answer Chromium with the reply,
        or refuse it (module docstring)."""
        url = request.url
        loop = asyncio.get_running_loop()
        main_frame = request.is_navigation_request() and request.frame.parent_frame is None
        if (
            request.method != "GET"
            or request.resource_type in _SKIPPED_TYPES
            or not url.startswith(("http://", "https://"))
            or budget.requests >= budget.max_requests
            or budget.bytes >= budget.max_bytes
            or loop.time() >= budget.deadline
        ):
            await _refused(route, budget, url, main_frame)
            return
        rule = None
        if main_frame:
            rule = budget.navigation_rule()
            if rule is not None and request.redirected_from is None and not rule(url):
                await route.abort("blockedbyclient")
                return
        budget.requests += 1
        try:
            page = await self._fetcher.fetch(url, allow_redirect=rule, deadline=budget.deadline)
        except FetchError:
            await _refused(route, budget, url, main_frame)
            return
        budget.bytes += len(page.body)
        if budget.bytes > budget.max_bytes:
            await _refused(route, budget, url, main_frame)
            return
        if page.redirects and request.is_navigation_request():
            # Chromium asks for the final URL itself (routed again), so the page's address,
            # and every relative link on it, is where the redirects ended.
            await route.fulfill(status=302, headers={"location": page.final_url}, body=b"")
            return
        content_type = page.content_type + (f"; charset={page.charset}" if page.charset else "")
        await route.fulfill(
            status=page.status, headers={"content-type": content_type}, body=page.body
        )


class BrowserSession:
    """One browser context: its own cookies and storage, its named tabs. Made by
    ``BrowserProvider.session``."""

    def __init__(self, provider: BrowserProvider, context: BrowserContext, name: str | None):
        self._provider = provider
        self._context = context
        self.name = name
        self._tabs: dict[str, Page] = {}
        self._own: set[Page] = set()  # tabs this session opened for a rendering
        self._budgets: dict[Page, _Budget] = {}
        self._closed = False

    @property
    def tab_names(self) -> tuple[str, ...]:
        """The named tabs still open."""
        return tuple(name for name, page in self._tabs.items() if not page.is_closed())

    @property
    def pages_open(self) -> int:
        """Tabs open in this session: named ones, renderings' own, any pop-up not yet
        closed."""
        return len(self._context.pages)

    def tab_open(self, name: str) -> bool:
        """Whether the tab named ``name`` exists and is open."""
        page = self._tabs.get(name)
        return page is not None and not page.is_closed()

    async def open_tab(self, name: str) -> None:
        """Open the tab named ``name`` (nothing when it is open already)."""
        await self._provider._on_loop(self._tab(name))

    async def close_tab(self, name: str) -> None:
        """Close the tab named ``name`` (nothing when there is none)."""
        page = self._tabs.pop(name, None)
        if page is not None:
            await self._provider._on_loop(page.close())

    async def _tab(self, name: str) -> Page:
        page = self._tabs.get(name)
        if page is None or page.is_closed():
            page = self._tabs[name] = await self._context.new_page()
        return page

    async def render(
        self,
        url: str,
        *,
        deadline: float | None = None,
        tab: str | None = None,
        allow_navigation: Callable[[str], bool] | None = None,
    ) -> Rendering:
        """Render ``url`` in tab ``tab`` (a named tab, reused and left open) or in a tab of
        its own (closed once read). Ends by ``deadline`` (event-loop time) and by
        ``[browser] page_timeout_s``. ``allow_navigation`` (optional) is asked about every
        other URL the tab's main frame is sent to (redirect hops, script navigations)
        before it is requested; a refusal ends the rendering with ``navigation_refused``
        (its ``detail`` is the URL). Raises ``RenderFailed``."""
        settings = self._provider.settings
        limit = time.monotonic() + settings.page_timeout_s
        end = min(limit, deadline) if deadline is not None else limit
        return await self._provider._on_loop(self._render(url, end, tab, allow_navigation))

    async def _render(
        self, url: str, end: float, tab: str | None, allow: Callable[[str], bool] | None
    ) -> Rendering:
        loop = asyncio.get_running_loop()
        started = loop.time()
        if end - started <= 0.05:
            raise RenderFailed(url, reason="render_timeout", detail="no time left")
        settings = self._provider.settings
        page = await _browser_step(url, self._tab(tab) if tab else self._context.new_page())
        if tab is None:
            self._own.add(page)
        budget = _Budget(settings.max_requests, settings.max_page_bytes, end)
        if allow is not None:
            budget.allow_navigation = lambda hop: hop == url or allow(hop)
        budget.kills_before = self._provider.memory_kills
        self._budgets[page] = budget
        self._provider.renderings += 1
        self._provider._rendering(+1)
        try:
            return await asyncio.wait_for(self._read(page, url, budget, started), end - started)
        except TimeoutError:
            self._check_memory(url, budget)
            raise RenderFailed(url, reason="render_timeout") from None
        except RenderFailed:
            self._check_memory(url, budget)
            raise
        finally:
            self._provider._rendering(-1)
            self._budgets.pop(page, None)
            if tab is None:
                self._own.discard(page)
                with contextlib.suppress(Exception):
                    await page.close()

    def _check_memory(self, url: str, budget: _Budget) -> None:
        """``RenderFailed`` ``render_memory`` when the rendering's tab crashed after the
        memory watch killed a renderer (its own, as far as anyone can tell)."""
        if budget.crashed and self._provider.memory_kills > budget.kills_before:
            raise RenderFailed(url, reason="render_memory", detail="renderer over its memory")

    async def _read(self, page: Page, url: str, budget: _Budget, started: float) -> Rendering:
        from playwright.async_api import Error as PlaywrightError

        loop = asyncio.get_running_loop()
        try:
            response = await page.goto(url, wait_until="load")
        except PlaywrightError as exc:
            _check_navigation(url, budget)
            raise RenderFailed(url, reason="navigation_failed", detail=str(exc)[:200]) from None
        _check_navigation(url, budget)
        if response is None or not response.ok:
            status = response.status if response is not None else 0
            raise RenderFailed(url, reason="navigation_failed", detail=f"HTTP {status}")
        await _settle(page, budget, min(loop.time() + _SETTLE_S, budget.deadline - 0.1))
        try:
            html = await page.content()
            _check_navigation(url, budget)
            _check_document(url, page)
        except PlaywrightError as exc:
            raise RenderFailed(url, reason="navigation_failed", detail=str(exc)[:200]) from None
        body = html.encode("utf-8")
        fetched = FetchedPage(
            url=url,
            final_url=page.url,
            status=response.status,
            content_type="text/html",
            charset="utf-8",
            body=body,
            raw_digest=sha256_digest(body),
        )
        return Rendering(
            page=fetched,
            requests=budget.requests,
            refused=tuple(budget.refused),
            fetched_bytes=budget.bytes,
            elapsed_s=loop.time() - started,
        )

    async def close(self) -> None:
        """Close this session's context (every tab in it). A named session is the
        provider's: it stays open until the provider closes."""
        if self._closed or self.name is not None:
            return
        self._closed = True
        await self._provider._on_loop(self._context.close())

    async def close_own_tabs(self) -> None:
        """Close the tabs this session opened itself (a rendering's own tab), leaving the
        named ones."""
        for page in list(self._own):
            self._own.discard(page)
            with contextlib.suppress(Exception):
                await self._provider._on_loop(page.close())

    # -- Playwright callbacks (on the browser loop) -------------------------------------------
    def _activity(self, page: Page, change: int) -> None:
        """A request of ``page`` began (+1) or ended (-1), as the page saw it."""
        budget = self._budgets.get(page)
        if budget is not None:
            budget.in_flight = max(0, budget.in_flight + change)
            budget.last_activity = asyncio.get_running_loop().time()

    async def _route(self, route: Route, request: Request) -> None:
        frame_page = _page_of(request)
        budget = self._budgets.get(frame_page) if frame_page is not None else None
        if budget is None:
            # A request of no rendering (a pop-up, a tab between renderings): refused.
            await route.abort("blockedbyclient")
            return
        await self._provider._fulfil(route, request, budget)

    def _crashed(self, page: Page) -> None:
        budget = self._budgets.get(page)
        if budget is not None:
            budget.crashed = True

    def _on_page(self, page: Page) -> None:
        page.on("crash", lambda _page: self._crashed(page))
        page.on("request", lambda _request: self._activity(page, +1))
        page.on("requestfinished", lambda _request: self._activity(page, -1))
        page.on("requestfailed", lambda _request: self._activity(page, -1))
        page.on("dialog", _dismiss)
        page.on("popup", _close_later)
        page.on("download", _cancel_download)


async def _browser_step(url: str, step: Coroutine[Any, Any, T]) -> T:
    """``step``, with a failure of the browser itself (crashed, closed under it) as
    ``RenderFailed`` ``browser_error``."""
    from playwright.async_api import Error as PlaywrightError

    try:
        return await step
    except PlaywrightError as exc:
        raise RenderFailed(url, reason="browser_error", detail=str(exc)[:200]) from None


async def _refused(route: Route, budget: _Budget, url: str, main_frame: bool) -> None:
    """Refuse one request. A refused main-frame navigation (the page sent itself somewhere
    the policy refuses, by script or meta refresh) also ends the rendering: Chromium would
    show its own error page in the tab, which is no document."""
    budget.refuse(url)
    if main_frame:
        budget.navigation_refused = budget.navigation_refused or url
    await route.abort("blockedbyclient")


def _check_navigation(url: str, budget: _Budget) -> None:
    if budget.navigation_refused is not None:
        raise RenderFailed(url, reason="navigation_refused", detail=budget.navigation_refused)


def _check_document(url: str, page: Page) -> None:
    """``RenderFailed`` ``error_page`` when the tab did not end on a web page: Chromium's
    own error page (``chrome-error://chromewebdata/``), ``about:blank``, a ``data:`` URL."""
    if not page.url.startswith(("http://", "https://")):
        raise RenderFailed(url, reason="error_page", detail=page.url[:200])


async def _settle(page: Page, budget: _Budget, until: float) -> None:
    """Wait until the page is quiet, or ``until`` (loop time): no request of it in flight
    (as the page saw them end) for ``_QUIET_S``, and its DOM the same size twice that far
    apart (a script still writing the text it fetched)."""
    from playwright.async_api import Error as PlaywrightError

    loop = asyncio.get_running_loop()
    size = -1
    while loop.time() < until:
        if budget.in_flight == 0 and loop.time() - budget.last_activity >= _QUIET_S:
            try:
                now = await page.evaluate(_DOM_SIZE)
            except PlaywrightError:
                return
            if now == size:
                return
            size = now
            budget.last_activity = loop.time()  # look again one quiet period on
        await asyncio.sleep(_POLL_S)


def _renderers_over(marker: str) -> list[int]:
    """The renderer processes of the Chromium started with ``marker`` (below this process)
    whose resident memory is over ``RENDERER_MAX_BYTES``."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    parents[int(entry.name)] = int(stat.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    below: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - below
        below |= frontier
    browser = [pid for pid in below if marker.encode() in _cmdline(pid)]
    tree: set[int] = set(browser)
    frontier = set(browser)
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - tree
        tree |= frontier
    page = os.sysconf("SC_PAGE_SIZE")
    over: list[int] = []
    for pid in tree:
        if b"--type=renderer" not in _cmdline(pid):
            continue
        try:
            with open(f"/proc/{pid}/statm", "rb") as statm:
                resident = int(statm.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
        if resident > RENDERER_MAX_BYTES:
            over.append(pid)
    return over


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read()
    except OSError:
        return b""


def _page_of(request: Request) -> Page | None:
    try:
        return request.frame.page
    except Exception:  # a service worker's or a detached frame's request: no page
        return None


async def _refuse_socket(socket: WebSocketRoute) -> None:
    # Not connected to the server: the page sees a socket that closes at once.
    await socket.close(code=1008, reason="refused")


async def _dismiss(dialog: Any) -> None:
    await dialog.dismiss()


async def _close_later(page: Page) -> None:
    await page.close()


async def _cancel_download(download: Any) -> None:
    await download.cancel()
