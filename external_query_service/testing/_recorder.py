"""Record a world: run the chain against real providers and keep what they answered.

``RecordingRuntime`` is an ``HttpRuntime`` (pass it as ``ExternalQueryService(http=...)``)
whose fetcher and endpoints note every response: bodies as received (bounded by the
network caps, with digests), redirect hops, and failures as the fault that replays them.
``record_world`` runs one question that way, with a fixed clock, and writes the world —
unless no provider answered at all (``NothingAnswered``): such a world would only replay
the failures of one moment, so keeping it takes ``allow_failed=True``.
Request headers (API keys travel there), adapter options other than the endpoint URLs and
the replay settings their ``Options.endpoints()`` names, and the ``[llm]`` section never
reach disk; see ``secrets.py`` for the rest. Which adapters are recorded, and which calls are
searches, is asked of each adapter's options, so a third-party adapter takes part like a
built-in one. A POST is filed with the JSON body fields it sent (``match``, secret-named
fields left out), and every call an adapter made to an MCP server over stdio as
``[[tools]]`` (its arguments and the result, or the fault that replays its failure). How
every page walk ended — which hits it reached, which pages it read and which it cut off, and
why — is kept as ``[[walks]]``, so the replay's walks end the same way whatever the host's
speed (``adapters/_page_walk.py``).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import httpx

from .._clock import fixed_clock
from .._digests import sha256_digest
from ..adapters._base import ToolCall
from ..adapters._page_walk import WalkRecord
from ..adapters.options import AdapterOptions, Endpoints
from ..errors import (
    BlockedDestination,
    ContentTooLarge,
    FetchDeadlineExceeded,
    FetchError,
    InputError,
    NothingAnswered,
    TooManyRedirects,
    UnsafeURL,
    UnsupportedContent,
    UpstreamStatus,
)
from ..gateway._registry import adapter_options
from ..models import ExternalAnswer, QuerySemantics
from ..net._fetch import ApiResponse, FetchedPage, HttpRuntime, SafeFetcher, TrustedEndpoint
from ..net._policy import Resolver
from ..service import ExternalQueryService
from ..settings import AdapterSettings, NetworkSettings, Settings
from ._faults import ORIGIN_FAULTS, Fault
from ._secrets import assert_no_secrets, is_secret_name, redact_url, scrub, secret_values
from .world_files import (
    MAX_WORLD_BYTES,
    ApiEntry,
    PageEntry,
    RecordedRun,
    SearchEntry,
    ToolEntry,
    WalkEntry,
    WorldInfo,
    WorldManifest,
    check_free_folder,
    write_world,
)

__all__ = [
    "Exchange",
    "NothingAnswered",
    "RecordResult",
    "Recording",
    "RecordingEndpoint",
    "RecordingFetcher",
    "RecordingRuntime",
    "record_world",
]

#: Network settings that describe one machine, not the world: never recorded.
_LOCAL_NETWORK_KEYS = ("allowed_networks", "resolve", "connect_to", "ca_bundle")


@dataclass(frozen=True)
class Exchange:
    """One URL as the chain met it."""

    kind: Literal["api", "page"]
    url: str
    status: int = 200
    content_type: str | None = None
    body: bytes | None = None
    redirect_to: str | None = None
    fault: Fault | None = None
    note: str = ""
    #: For a POST: the JSON body's top-level fields, secret-named ones left out.
    match: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        """What tells two requests apart: the URL, and a POST's body fields."""
        if self.match is None:
            return self.url
        return self.url + "\n" + json.dumps(self.match, sort_keys=True, ensure_ascii=False)

    @property
    def failed(self) -> bool:
        """True when the exchange recorded a failure (a fault) rather than a reply."""
        return self.fault is not None or self.status >= 400


#: The fault that replays a tool call's failure (by the adapter's reason).
_TOOL_FAULTS: dict[str, Literal["hang", "reset", "oversized"]] = {
    "deadline_exceeded": "hang",
    "server_closed": "reset",
    "content_too_large": "oversized",
}


def _posted_fields(body: Any) -> dict[str, Any] | None:
    """What of a POSTed JSON body a world matches on: its non-secret top-level fields."""
    if not isinstance(body, Mapping):
        return None
    return {str(key): value for key, value in body.items() if not is_secret_name(str(key))}


@dataclass
class Recording:
    """Every exchange of a run, in order; the first answer for a request is the one kept,
    except that an answer replaces a failure of the same request (a retried 429)."""

    max_bytes: int = MAX_WORLD_BYTES
    exchanges: list[Exchange] = field(default_factory=list)
    #: Calls to tool servers outside HTTP, in order (the first for given arguments kept).
    tools: list[ToolCall] = field(default_factory=list)
    #: How every page walk ended, in the order they ended.
    walks: list[WalkRecord] = field(default_factory=list)
    #: Set when an exchange would pass ``max_bytes``. The chain may swallow the error
    #: (an adapter that crashes is just a failed attempt), so ``record_world`` checks this.
    overflow: bool = False
    _seen: set[str] = field(default_factory=set)
    _bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, exchange: Exchange) -> None:
        """Keep ``exchange`` unless its URL is already recorded; ``InputError`` when the
        recording would pass ``max_bytes``."""
        with self._lock:
            earlier = None
            if exchange.key in self._seen:
                earlier = next(item for item in self.exchanges if item.key == exchange.key)
                if not earlier.failed or exchange.failed:
                    return
            if self._bytes + len(exchange.body or b"") > self.max_bytes:
                self.overflow = True
                raise InputError(f"the recording grew beyond {self.max_bytes} bytes")
            self._bytes += len(exchange.body or b"")
            self._seen.add(exchange.key)
            if earlier is not None:
                self.exchanges[self.exchanges.index(earlier)] = exchange
            else:
                self.exchanges.append(exchange)

    def tool(self, call: ToolCall) -> None:
        """Note one tool call (a ``ToolObserver``); later calls with the same arguments by
        the same adapter are the same request and are not kept again."""
        data = json.dumps(call.result).encode("utf-8") if call.result is not None else b""
        with self._lock:
            if any(
                (item.adapter_id, item.tool, item.arguments)
                == (call.adapter_id, call.tool, call.arguments)
                for item in self.tools
            ):
                return
            if self._bytes + len(data) > self.max_bytes:
                self.overflow = True
                raise InputError(f"the recording grew beyond {self.max_bytes} bytes")
            self._bytes += len(data)
            self.tools.append(call)

    def walk(self, record: WalkRecord) -> None:
        """Note how a page walk ended (a ``WalkObserver``)."""
        with self._lock:
            self.walks.append(record)

    @property
    def answered(self) -> bool:
        """Whether any provider answered with a body: a success, not a status or a fault
        (for a tool: a result that is not a tool error)."""
        return any(
            item.fault is None and item.redirect_to is None and item.status < 400 and item.body
            for item in self.exchanges
        ) or any(
            isinstance(call.result, dict) and not call.result.get("isError") for call in self.tools
        )

    def page(self, page: FetchedPage) -> None:
        """Record a fetched page, with one redirect exchange per hop."""
        chain = [page.url, *page.redirects]
        for here, there in itertools.pairwise(chain):
            self.add(Exchange("page", here, status=302, redirect_to=there))
        content_type = page.content_type + (f"; charset={page.charset}" if page.charset else "")
        for url in dict.fromkeys((chain[-1], page.final_url)):
            self.add(Exchange("page", url, page.status, content_type, page.body))

    def api(self, response: ApiResponse, *, match: dict[str, Any] | None = None) -> None:
        """Record a fact-API reply (``match``: the request body it answered, for a POST)."""
        body = response.body or json.dumps(response.data, ensure_ascii=False).encode("utf-8")
        self.add(
            Exchange("api", response.url, response.status, "application/json", body, match=match)
        )

    def failure(
        self,
        kind: Literal["api", "page"],
        url: str,
        exc: FetchError,
        *,
        match: dict[str, Any] | None = None,
    ) -> None:
        """Note a failed fetch as the status or fault that fails the same way on replay."""
        detail = exc.detail.lower()
        if isinstance(exc, UpstreamStatus):
            self.add(Exchange(kind, url, exc.status, "text/plain", b"", note=str(exc), match=match))
            return
        fault: Fault
        if isinstance(exc, ContentTooLarge):
            fault = "oversized"
        elif isinstance(exc, TooManyRedirects):
            fault = "redirect_loop"
        elif isinstance(exc, FetchDeadlineExceeded):
            # A body that had begun is a cut-off page, not a silent one (pages.py tells apart).
            fault = "slow_body" if exc.responded else "hang"
        elif isinstance(exc, BlockedDestination | UnsafeURL) and "redirect" in detail:
            fault = "redirect_private"
        elif isinstance(exc, BlockedDestination) or (
            isinstance(exc, UnsafeURL) and "port" in detail
        ):
            fault = "blocked"
        elif isinstance(exc, UnsafeURL):
            return  # the URL gate refuses it again on replay, before any connection
        elif isinstance(exc, UnsupportedContent) or exc.reason == "invalid_json":
            note = str(exc)
            self.add(
                Exchange(kind, url, 200, "application/octet-stream", b"", note=note, match=match)
            )
            return
        elif exc.reason in ("connect_failed", "resolve_failed"):
            fault = "refused"
        elif exc.responded:
            fault = "slow_body"  # broke off mid-body: replayed as a body that never ends
        else:
            fault = "reset"
        note = f"{exc.reason}: {exc.detail}"[:300]
        self.add(Exchange(kind, url, fault=fault, note=note, match=match))


class RecordingFetcher(SafeFetcher):
    """A ``SafeFetcher`` that notes every page (and every failure) it meets."""

    def __init__(
        self, network: NetworkSettings, recording: Recording, *, resolver: Resolver | None = None
    ) -> None:
        super().__init__(network, resolver=resolver)
        self._recording = recording

    async def fetch(self, url: str, **options: Any) -> FetchedPage:
        try:
            page = await super().fetch(url, **options)
        except FetchError as exc:
            self._recording.failure("page", url, exc)
            raise
        self._recording.page(page)
        return page


class RecordingEndpoint(TrustedEndpoint):
    """A ``TrustedEndpoint`` that notes every API answer (and failure) it meets."""

    def __init__(
        self,
        base_url: str,
        network: NetworkSettings,
        recording: Recording,
        *,
        resolver: Resolver | None = None,
    ) -> None:
        super().__init__(base_url, network, resolver=resolver)
        self._recording = recording

    async def get_json(
        self,
        path: str,
        params: Mapping[str, str | int] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> ApiResponse:
        """The endpoint's reply, recorded; a failure is recorded too and raised again."""
        try:
            response = await super().get_json(path, params, headers=headers)
        except FetchError as exc:
            if exc.url.startswith(("http://", "https://")):
                self._recording.failure("api", exc.url, exc)
            raise
        self._recording.api(response)
        return response

    async def post_json(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> ApiResponse:
        match = _posted_fields(body)
        try:
            response = await super().post_json(path, body, headers=headers)
        except FetchError as exc:
            if exc.url.startswith(("http://", "https://")):
                self._recording.failure("api", exc.url, exc, match=match)
            raise
        self._recording.api(response, match=match)
        return response


class RecordingRuntime(HttpRuntime):
    """``HttpRuntime`` that records; ``recording`` holds what it saw."""

    def __init__(
        self,
        network: NetworkSettings,
        *,
        recording: Recording | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        super().__init__(network, resolver=resolver)
        self.recording = recording if recording is not None else Recording()
        self.fetcher = RecordingFetcher(network, self.recording, resolver=resolver)

    def _new_endpoint(self, base_url: str, kind: str = "api") -> TrustedEndpoint:
        """A recording endpoint for ``base_url`` (kept and closed by ``HttpRuntime``; it
        keeps nothing, so ``kind`` does not matter)."""
        return RecordingEndpoint(base_url, self._network, self.recording, resolver=self._resolver)


# -- from a recording to a world ----------------------------------------------------------------


def _extension(content_type: str | None, kind: str) -> str:
    media = (content_type or "").split(";")[0].strip().lower()
    if media in ("text/html", "application/xhtml+xml"):
        return ".html"
    if media == "text/plain":
        return ".txt"
    if media == "application/json" or kind == "api":
        return ".json"
    return ".bin"


def _strip_query(url: str) -> str:
    # Endpoints drop a base URL's query anyway; keeping it would only keep secrets.
    return str(httpx.URL(redact_url(url)).copy_with(query=None))


def _outside(settings: Settings) -> Iterator[tuple[AdapterSettings, AdapterOptions, Endpoints]]:
    """Each adapter that reaches outside, with its options and endpoints (local ones, like
    a docs folder, are no part of the outside world)."""
    for adapter in settings.adapters:
        options = adapter_options(adapter)
        endpoints = options.endpoints()
        if endpoints is not None:
            yield adapter, options, endpoints


def _recorded_adapters(settings: Settings) -> list[dict[str, Any]]:
    adapters = []
    for adapter, options, endpoints in _outside(settings):
        entry: dict[str, Any] = {"kind": adapter.kind, "id": adapter.id}
        for name, url in endpoints.urls.items():
            if name in options.model_fields_set:  # a default stays the adapter's default
                entry[name] = _strip_query(url)
        for name in endpoints.keep:
            if name in options.model_fields_set:
                entry[name] = options.model_dump(mode="json")[name]
        if not adapter.enabled:
            entry["enabled"] = False
        adapters.append(entry)
    return adapters


def _search_engines(settings: Settings) -> dict[str, str]:
    """``<search API>/search`` → adapter id, for every adapter that searches SearXNG-style."""
    return {
        _strip_query(endpoints.search_url).rstrip("/") + "/search": adapter.id
        for adapter, _, endpoints in _outside(settings)
        if endpoints.search_url
    }


@dataclass(frozen=True)
class _WorldParts:
    manifest: WorldManifest
    files: dict[str, bytes]
    scrubbed: tuple[str, ...] = ()


def _build_world(
    recording: Recording,
    settings: Settings,
    *,
    name: str,
    now: datetime,
    run: RecordedRun,
    secrets: frozenset[str],
) -> _WorldParts:
    files: dict[str, bytes] = {}
    scrubbed: list[str] = []
    search: list[SearchEntry] = []
    pages: list[PageEntry] = []
    api: list[ApiEntry] = []
    engines = _search_engines(settings)
    served_origins = {
        httpx.URL(item.url).netloc for item in recording.exchanges if item.fault is None
    }
    searched: set[tuple[str, str]] = set()
    for number, item in enumerate(recording.exchanges, start=1):
        url = redact_url(item.url)
        fault = item.fault
        if fault in ORIGIN_FAULTS and httpx.URL(item.url).netloc in served_origins:
            fault = "reset"  # the origin answered other requests: fail this route only
        parsed = httpx.URL(url)
        engine = engines.get(str(parsed.copy_with(query=None)))
        query = parsed.params.get("q") if item.redirect_to is None else None
        is_search = engine is not None and query is not None
        if is_search:
            if (engine, query) in searched:
                continue
            searched.add((str(engine), str(query)))
        common: dict[str, Any] = {"status": item.status, "fault": fault, "note": item.note}
        if item.body is not None and fault is None and item.redirect_to is None:
            folder = "search" if is_search else {"api": "api", "page": "pages"}[item.kind]
            body = scrub(item.body, secrets)
            file = f"{folder}/{number:04d}{_extension(item.content_type, item.kind)}"
            files[file] = body
            if body != item.body:
                scrubbed.append(file)
            common.update(file=file, sha256=sha256_digest(body))
        if is_search:
            search.append(SearchEntry(query=query, adapter=engine, **common))
            continue
        extra: dict[str, Any] = {"content_type": item.content_type, "redirect_to": item.redirect_to}
        if item.kind == "page":
            pages.append(PageEntry(url=url, **common, **extra))
        else:
            api.append(ApiEntry(url=url, match=item.match, **common, **extra))
    tools = _tool_entries(recording.tools, files, scrubbed, secrets)
    walks = [
        WalkEntry(
            adapter=walk.adapter_id,
            # As the recorded search bodies are scrubbed, so the replay sees the same URLs.
            hits=tuple(scrub(url.encode("utf-8"), secrets).decode("utf-8") for url in walk.hits),
            fates=walk.fates,
        )
        for walk in recording.walks
    ]
    network = settings.network.model_dump(mode="json", exclude_defaults=True)
    for key in _LOCAL_NETWORK_KEYS:
        network.pop(key, None)
    manifest = WorldManifest(
        world=WorldInfo(name=name, now=now),
        recorded=run,
        network=network,
        sources=settings.sources.model_dump(mode="json", exclude_defaults=True),
        verifier=settings.verifier.model_dump(mode="json", exclude_defaults=True),
        adapters=tuple(_recorded_adapters(settings)),
        search=tuple(search),
        pages=tuple(pages),
        api=tuple(api),
        tools=tuple(tools),
        walks=tuple(walks),
    )
    return _WorldParts(manifest, files, tuple(scrubbed))


def _tool_entries(
    calls: list[ToolCall], files: dict[str, bytes], scrubbed: list[str], secrets: frozenset[str]
) -> list[ToolEntry]:
    """``[[tools]]`` entries (results as files under ``tools/``), numbered after the other
    files; a failure becomes the fault that fails the same way, or is left out."""
    entries = []
    for number, call in enumerate(calls, start=len(files) + 1):
        common: dict[str, Any] = {
            "adapter": call.adapter_id,
            "tool": call.tool,
            "arguments": dict(call.arguments),
        }
        if call.failure is not None:
            fault = _TOOL_FAULTS.get(call.failure)
            if fault is not None:
                entries.append(ToolEntry(**common, fault=fault, note=call.failure))
            continue
        raw = json.dumps(call.result, ensure_ascii=False, indent=1).encode("utf-8")
        body = scrub(raw, secrets)
        file = f"tools/{number:04d}.json"
        files[file] = body
        if body != raw:
            scrubbed.append(file)
        entries.append(ToolEntry(**common, file=file, sha256=sha256_digest(body)))
    return entries


@dataclass(frozen=True)
class RecordResult:
    """A recorded world: its folder, the run's answer, how many exchanges and bytes were
    written, and the body files whose secrets were replaced."""

    directory: Path
    answer: ExternalAnswer
    exchanges: int
    bytes: int
    #: Body files a provider had echoed a secret into, stored with it replaced by
    #: ``REDACTED``: evidence drawn from them replays with a different ``raw_digest``.
    scrubbed: tuple[str, ...] = ()


def record_world(
    question: str,
    semantics: QuerySemantics | Mapping[str, Any] | None,
    settings: Settings,
    out: str | Path,
    *,
    now: datetime | None = None,
    environ: Mapping[str, str] | None = None,
    max_bytes: int = MAX_WORLD_BYTES,
    allow_failed: bool = False,
) -> RecordResult:
    """Answer ``question`` against the providers ``settings`` name, recording everything
    fetched, and write the world to ``out`` (a new or empty folder).

    The run uses a fixed clock (``now``, default: this moment) so the replay reproduces
    ``accessed_at`` and every date check. The ``[llm]`` section is left out (a model's
    reply is not part of the world), and so are local-docs adapters. ``out`` also gets
    ``answer.json`` (the recorded answer) and ``semantics.json`` when semantics were given.
    When no provider answered with a body, nothing is written and ``NothingAnswered`` is
    raised, unless ``allow_failed``.
    """
    check_free_folder(out)  # before any request: a run is not wasted on a taken folder
    environ = os.environ if environ is None else environ
    secrets = secret_values(settings, environ)
    moment = now or datetime.now().astimezone().replace(microsecond=0)
    live = settings.model_copy(update={"llm": None})
    runtime = RecordingRuntime(live.network, recording=Recording(max_bytes=max_bytes))
    recording = runtime.recording
    clock = fixed_clock(moment)
    with ExternalQueryService(
        live, clock=clock, http=runtime, tool_observer=recording.tool, walk_observer=recording.walk
    ) as service:
        answer = service.answer(question, semantics)
    if runtime.recording.overflow:
        # The answer went on without what did not fit; such a world would not replay it.
        raise InputError(f"the recording grew beyond {max_bytes} bytes; allow more (--max-bytes)")
    if not allow_failed and not runtime.recording.answered:
        raise NothingAnswered(answer)

    out = Path(out)
    semantics_data = (
        semantics.model_dump(mode="json", exclude_defaults=True)
        if isinstance(semantics, QuerySemantics)
        else dict(semantics or {})
    )
    run = RecordedRun(
        question=question,
        semantics_file="semantics.json" if semantics_data else None,
        answer_file="answer.json",
        status=answer.status,
        reason=answer.reason,
    )
    parts = _build_world(
        runtime.recording, live, name=out.name, now=moment, run=run, secrets=secrets
    )
    files = dict(parts.files)
    files["answer.json"] = scrub(answer.model_dump_json(indent=2).encode("utf-8"), secrets)
    if semantics_data:
        text = json.dumps(semantics_data, ensure_ascii=False, indent=2, default=str)
        files["semantics.json"] = scrub(text.encode("utf-8"), secrets)
    write_world(out, parts.manifest, files)
    assert_no_secrets(out, secrets)
    return RecordResult(
        directory=out,
        answer=answer,
        exchanges=len(runtime.recording.exchanges),
        bytes=sum(len(data) for data in parts.files.values()),
        scrubbed=parts.scrubbed,
    )
