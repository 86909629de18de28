"""A service's parts, built from its settings apart from the pipeline that answers with them.

``ExternalQueryService`` asks ``build_components`` once for everything it answers with: the
evidence store, the shared Redis cache, the HTTP runtime, the analysis pool, the adapters
behind their gateway, the verifier, the presenters, the model client, the ledger and the
browser. The optional parts (Redis, the model, the ledger, the browser) are imported only
when their settings turn them on, so a service configured without them loads none of them.
``Components`` also answers for what those parts hold: the shared backends' readiness,
warming up, and closing.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._clock import Clock
from ._evidence_store import EvidenceStore
from ._memo import SharedMemo, ThreadMemo, held_bytes
from .adapters._base import Adapter, AdapterRuntime, ToolObserver
from .adapters._page_walk import RecordedWalks, WalkObserver
from .execution._analysis_pool import AnalysisPool, warm_pipeline, warm_scoring
from .gateway._gateway import Gateway
from .gateway._registry import adapter_class
from .models import CORE_QUERY_KINDS, Readiness
from .net._cache import response_cache
from .net._fetch import HttpRuntime
from .net._sites import registrable_domain
from .observability._events import CacheHits
from .planner._structured import Planner, StructuredPlanner
from .presenter._extractive import ExtractivePresenter
from .presenter._presenter import Presenter
from .settings import CacheSettings, Settings
from .text._semantic import similarities
from .verifier import Verifier

if TYPE_CHECKING:
    from .browser import BrowserProvider
    from .llm import ChatCompletionsClient
    from .presenter import ModelPresenter
    from .storage import Ledger
    from .storage._redis_cache import RedisMemo, SharedCache

__all__ = ["WARM_UP_WORKERS_S", "Components", "analysis_memo", "build_components"]

#: How long ``warm_up`` waits for the analysis workers to be warm (they keep starting after).
WARM_UP_WORKERS_S = 60.0

#: The longest a readiness probe of the ledger waits.
_PROBE_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Components:
    """Everything one service answers with, each part built once from its settings. The
    service shows most of them as its own attributes, documented there."""

    store: EvidenceStore
    cache_hits: CacheHits
    shared_cache: SharedCache | None
    #: The page fetcher and the trusted endpoints, sharing one response cache.
    http: HttpRuntime
    analysis: AnalysisPool
    gateway: Gateway
    query_kinds: tuple[str, ...]
    verifier: Verifier
    #: The extractive presenter, and the model's with ``[llm]`` configured.
    presenter: Presenter
    llm: ChatCompletionsClient | None
    #: The structured planner hook given, else the model planner, else host fields only.
    planner: Planner
    #: The ledger ``[ledger] url`` or ``path`` names (None: records stay in the answer).
    ledger: Ledger | None
    browser: BrowserProvider | None
    #: The semantic answerability judgment is on (``[answerability] semantic``).
    semantic: bool = False

    @property
    def llm_presenter(self) -> ModelPresenter | None:
        """The model presenter (``[llm]`` configured), which falls back on the extractive one."""
        return self.presenter.model

    async def probe_backends(self) -> dict[str, Readiness]:
        """The configured shared parts, each really asked now: ``ledger`` when one is
        configured, ``cache`` with ``[cache] url``."""
        found: dict[str, Readiness] = {}
        if self.ledger is not None:
            found["ledger"] = await _ledger_readiness(self.ledger)
        if self.shared_cache is not None:
            why = await asyncio.to_thread(self.shared_cache.ping)
            # Ready but ``unsigned``: anyone who can write to Redis could plant entries.
            unsigned = None if self.shared_cache.signed else "unsigned"
            found["cache"] = Readiness(
                ready=why is None, reason=unsigned if why is None else "cache_unavailable"
            )
        return found

    def warm_up(self) -> None:
        """The once-per-process part of warming up (CPU-bound; any thread): analysis
        workers and browser started, the page pipeline (only its term cutting when workers
        do the rest), templates and Public Suffix List loaded, the embedding model with the
        semantic judgment on, and anyio's asyncio backend imported."""
        self.analysis.start()  # the workers warm up beside this process
        if self.browser is not None:
            self.browser.start()
        if self.analysis.processes:
            # The workers extract: this process only cuts questions and snippets into terms
            # (a page analysed here after all, with no worker, loads the rest then).
            warm_scoring()
        else:
            warm_pipeline()
        self.presenter.load_templates()
        registrable_domain("www.example.com")  # the Public Suffix List, parsed once
        if self.semantic:
            similarities("warm-up", ["warm-up"])  # the model loaded and its engine run once
        # httpcore asks anyio for the running loop's backend on its first request; anyio
        # imports that backend then. It is imported here instead, as a module: not by an
        # empty anyio run on a thread, whose new event loop needs a file descriptor of its
        # own (a server at its descriptor limit, with a thousand idle sockets open, saw that
        # thread die with EMFILE and a traceback in its log).
        importlib.import_module("anyio._backends._asyncio")
        self.analysis.wait_ready(WARM_UP_WORKERS_S)

    async def prepare_loop(self, threads: int) -> None:
        """The running loop's page client built, and ``threads`` of its worker threads
        started (each worker is made on first use otherwise)."""
        self.http.fetcher.prepare()
        pause = functools.partial(time.sleep, 0.002)  # busy long enough to need another
        await asyncio.gather(*(asyncio.to_thread(pause) for _ in range(threads)))

    async def release_loop(self) -> None:
        """Everything held on the running loop: adapters' processes, then HTTP clients."""
        for adapter in self.gateway.adapters.values():
            await adapter.aclose()
        await self.http.aclose()

    async def astop_workers(self) -> None:
        """The analysis workers (stopped on a thread) and the browser, from a running loop."""
        await asyncio.to_thread(self.analysis.close)
        if self.browser is not None:
            await self.browser.aclose()

    def close(self) -> None:
        """Everything not bound to an event loop: the analysis workers, the browser, the
        ledger and the shared cache. Each part's own close is idempotent."""
        self.analysis.close()
        if self.browser is not None:
            self.browser.close()
        if self.ledger is not None:
            self.ledger.close()
        if self.shared_cache is not None:
            self.shared_cache.close()


def build_components(
    settings: Settings,
    *,
    clock: Clock,
    planner: StructuredPlanner | None = None,
    store: EvidenceStore | None = None,
    http: HttpRuntime | None = None,
    tool_observer: ToolObserver | None = None,
    walk_observer: WalkObserver | None = None,
    recorded_walks: RecordedWalks | None = None,
) -> Components:
    """Every part ``settings`` asks for. ``planner``, ``store`` and ``http`` replace the
    parts that would be built (an explicit planner wins over a configured model's);
    ``tool_observer`` is told of every call an adapter makes to a tool server outside HTTP,
    ``walk_observer`` of how every page walk ended; ``recorded_walks`` replays a recorded
    world's walks (``adapters/_page_walk.py``)."""
    caching = settings.cache
    if store is None:
        store = EvidenceStore(caching.store_max_bytes, hold_s=caching.store_hold_s)
    cache_hits = CacheHits()
    shared = _open_shared_cache(caching)
    if http is None:
        responses = shared.responses if shared is not None else None
        cache = response_cache(caching, clock, responses, on_hit=cache_hits.hit)
        http = HttpRuntime(settings.network, cache=cache, clock=clock)
    analysis = AnalysisPool(settings.analysis, max_page_bytes=settings.network.max_page_bytes)
    runtime = AdapterRuntime(
        network=settings.network,
        fetcher=http.fetcher,
        endpoint=http.endpoint,
        store=store,
        clock=clock,
        sources=settings.sources,
        analyses=analysis_memo(
            caching, _shared_analyses(shared), on_hit=cache_hits.hit, runner=analysis.run
        ),
        search_endpoint=http.search_endpoint,
        tool_observer=tool_observer,
        walk_observer=walk_observer,
        recorded_walks=recorded_walks,
        semantic=settings.answerability.semantic,
    )
    adapters: list[Adapter] = [
        adapter_class(config.kind)(config, runtime) for config in settings.adapters
    ]
    kinds = (*CORE_QUERY_KINDS, *(k for a in adapters for k in a.supported_query_kinds))
    query_kinds = tuple(dict.fromkeys(kinds))
    extractive = ExtractivePresenter(language=settings.presenter.language)
    llm, model_presenter = None, None
    if settings.llm:  # the model package is imported only when ``[llm]`` is configured
        from .llm import ChatCompletionsClient
        from .planner import LLMPlanner
        from .presenter import ModelPresenter

        llm = ChatCompletionsClient(settings.llm)
        if planner is None:
            planner = LLMPlanner(llm, kinds=query_kinds, clock=clock)
        model_presenter = ModelPresenter(llm, extractive=extractive)
    return Components(
        store=store,
        cache_hits=cache_hits,
        shared_cache=shared,
        http=http,
        analysis=analysis,
        gateway=Gateway(adapters, deadline_s=settings.network.deadline_s, needs=settings.verifier),
        query_kinds=query_kinds,
        verifier=Verifier(settings),
        presenter=Presenter(extractive, model=model_presenter),
        llm=llm,
        planner=Planner(planner),
        ledger=_open_ledger(settings, clock),
        browser=_open_browser(settings),
        semantic=settings.answerability.semantic,
    )


def _open_shared_cache(caching: CacheSettings) -> SharedCache | None:
    """The Redis cache ``[cache] url`` names; its module is imported only then."""
    if caching.url is None:
        return None
    from .storage._redis_cache import open_shared_cache

    return open_shared_cache(caching)


def _encode_analysis(value: Any) -> bytes | None:
    """A page analysis as JSON for the shared cache (anything else is not shared)."""
    from .text._analyse import PageAnalysis, analysis_to_json

    return analysis_to_json(value) if isinstance(value, PageAnalysis) else None


def _shared_analyses(shared: SharedCache | None) -> RedisMemo | None:
    """Page analyses kept in the shared cache too, so other processes reuse them."""
    if shared is None:
        return None
    from .storage._redis_cache import ANALYSIS_TTL_S, RedisMemo
    from .text._analyse import analysis_from_json

    return RedisMemo(
        shared.analyses, encode=_encode_analysis, decode=analysis_from_json, ttl_s=ANALYSIS_TTL_S
    )


def _open_ledger(settings: Settings, clock: Clock) -> Ledger | None:
    """The ledger ``[ledger]`` names; the storage package is imported only then."""
    if settings.ledger.url is None and settings.ledger.path is None:
        return None
    from .storage import open_configured_ledger

    return open_configured_ledger(settings.ledger, clock=clock)


def _open_browser(settings: Settings) -> BrowserProvider | None:
    """The browser ``[browser] mode`` turns on; nothing browser is loaded with it off.
    Its Chromium starts with the first page rendered."""
    if settings.browser.mode == "off":
        return None
    from .browser import BrowserProvider

    return BrowserProvider(settings.browser, settings.network)


async def _ledger_readiness(ledger: Ledger) -> Readiness:
    """Whether the ledger answers within ``_PROBE_S`` with the schema this code writes."""
    from .storage import SCHEMA_VERSION, LedgerError  # loaded with the ledger

    try:
        version = await asyncio.wait_for(asyncio.to_thread(ledger.schema_version), _PROBE_S)
    except LedgerError as exc:
        return Readiness(ready=False, reason=exc.reason)
    except (TimeoutError, OSError):
        return Readiness(ready=False, reason="ledger_unavailable")
    current = version == SCHEMA_VERSION
    return Readiness(ready=current, reason=None if current else "ledger_needs_migration")


def analysis_memo(
    cache: CacheSettings,
    shared: SharedMemo | None = None,
    *,
    on_hit: Callable[[str], None] | None = None,
    runner: Callable[..., Awaitable[Any]] | None = None,
) -> ThreadMemo:
    """The runtime's ``analyses`` for ``[cache]``: page analyses kept up to
    ``analysis_max_bytes`` (what their objects hold, term counts and all) when caching is on,
    and in ``shared`` too (other processes') when given; computed by ``runner`` (the
    service's analysis pool; a thread when None); each kept analysis used again is told to
    ``on_hit`` as an ``analysis`` hit."""
    told = (lambda: on_hit("analysis")) if on_hit is not None else None
    if not cache.enabled:
        return ThreadMemo(0, size=_analysis_size, on_hit=told, runner=runner)
    return ThreadMemo(
        cache.analysis_max_bytes, size=_analysis_size, shared=shared, on_hit=told, runner=runner
    )


def _analysis_size(analysis: object) -> int:
    # What the analysis holds (its text and term counts), plus the memo's own entry.
    own = getattr(analysis, "held_bytes", None)
    return (own() if callable(own) else held_bytes(analysis)) + 1024
