"""Record a world: run the chain against real providers and keep what they answered.

``RecordingRuntime`` is an ``HttpRuntime`` (pass it as ``ExternalQueryService(http=...)``)
whose fetcher and endpoints note every response: bodies as received (bounded by the
network caps, with digests), redirect hops, and failures as the fault that replays them.
``record_world`` runs one question that way, with a fixed clock, and writes the world —
unless no provider answered at all (``NothingAnswered``): such a world would only replay
the failures of one moment, so keeping it takes ``allow_failed=True``.
Request headers, adapter options and the ``[llm]`` section never reach disk; see
``secrets.py`` for the rest.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import httpx

from ..clock import fixed_clock
from ..digests import sha256_digest
from ..errors import (
    BlockedDestination,
    ContentTooLarge,
    ExternalQueryError,
    FetchDeadlineExceeded,
    FetchError,
    InputError,
    TooManyRedirects,
    UnsafeURL,
    UnsupportedContent,
    UpstreamStatus,
)
from ..models import ExternalAnswer, QuerySemantics
from ..net.fetch import ApiResponse, FetchedPage, HttpRuntime, SafeFetcher, TrustedEndpoint
from ..net.policy import Resolver
from ..service import ExternalQueryService
from ..settings import NetworkSettings, Settings
from .faults import ORIGIN_FAULTS, Fault
from .secrets import assert_no_secrets, redact_url, scrub, secret_values
from .world_files import (
    MAX_WORLD_BYTES,
    ApiEntry,
    PageEntry,
    RecordedRun,
    SearchEntry,
    WorldInfo,
    WorldManifest,
    check_free_folder,
    write_world,
)

__all__ = ["NothingAnswered", "RecordResult", "Recording", "RecordingRuntime", "record_world"]

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


@dataclass
class Recording:
    """Every exchange of a run, in order; the first answer for a URL is the one kept."""

    max_bytes: int = MAX_WORLD_BYTES
    exchanges: list[Exchange] = field(default_factory=list)
    #: Set when an exchange would pass ``max_bytes``. The chain may swallow the error
    #: (an adapter that crashes is just a failed attempt), so ``record_world`` checks this.
    overflow: bool = False
    _seen: set[str] = field(default_factory=set)
    _bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, exchange: Exchange) -> None:
        with self._lock:
            if exchange.url in self._seen:
                return
            if self._bytes + len(exchange.body or b"") > self.max_bytes:
                self.overflow = True
                raise InputError(f"the recording grew beyond {self.max_bytes} bytes")
            self._bytes += len(exchange.body or b"")
            self._seen.add(exchange.url)
            self.exchanges.append(exchange)

    @property
    def answered(self) -> bool:
        """Whether any provider answered with a body: a success, not a status or a fault."""
        return any(
            item.fault is None and item.redirect_to is None and item.status < 400 and item.body
            for item in self.exchanges
        )

    def page(self, page: FetchedPage) -> None:
        chain = [page.url, *page.redirects]
        for here, there in itertools.pairwise(chain):
            self.add(Exchange("page", here, status=302, redirect_to=there))
        content_type = page.content_type + (f"; charset={page.charset}" if page.charset else "")
        for url in dict.fromkeys((chain[-1], page.final_url)):
            self.add(Exchange("page", url, page.status, content_type, page.body))

    def api(self, response: ApiResponse) -> None:
        body = response.body or json.dumps(response.data, ensure_ascii=False).encode("utf-8")
        self.add(Exchange("api", response.url, response.status, "application/json", body))

    def failure(self, kind: Literal["api", "page"], url: str, exc: FetchError) -> None:
        """Note a failed fetch as the status or fault that fails the same way on replay."""
        detail = exc.detail.lower()
        if isinstance(exc, UpstreamStatus):
            self.add(Exchange(kind, url, exc.status, "text/plain", b"", note=str(exc)))
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
            self.add(Exchange(kind, url, 200, "application/octet-stream", b"", note=str(exc)))
            return
        elif exc.reason in ("connect_failed", "resolve_failed"):
            fault = "refused"
        elif exc.responded:
            fault = "slow_body"  # broke off mid-body: replayed as a body that never ends
        else:
            fault = "reset"
        self.add(Exchange(kind, url, fault=fault, note=f"{exc.reason}: {exc.detail}"[:300]))


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
        self, path: str, params: Mapping[str, str | int] | None = None
    ) -> ApiResponse:
        try:
            response = await super().get_json(path, params)
        except FetchError as exc:
            if exc.url.startswith(("http://", "https://")):
                self._recording.failure("api", exc.url, exc)
            raise
        self._recording.api(response)
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
        self._network_settings = network
        self._resolver_override = resolver
        self._recorders: dict[str, RecordingEndpoint] = {}

    def endpoint(self, base_url: str) -> TrustedEndpoint:
        endpoint = self._recorders.get(base_url)
        if endpoint is None:
            endpoint = RecordingEndpoint(
                base_url,
                self._network_settings,
                self.recording,
                resolver=self._resolver_override,
            )
            self._recorders[base_url] = endpoint
        return endpoint

    async def aclose(self) -> None:
        await super().aclose()
        for endpoint in self._recorders.values():
            await endpoint.aclose()


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


def _recorded_adapters(settings: Settings) -> list[dict[str, Any]]:
    adapters = []
    for adapter in settings.adapters:
        if adapter.kind == "local_docs":
            continue  # a local folder is not part of the outside world
        entry: dict[str, Any] = {"kind": adapter.kind, "id": adapter.id}
        for name in ("base_url", "geocoding_url"):
            value = getattr(adapter, name)
            if value:
                entry[name] = _strip_query(value)
        if not adapter.enabled:
            entry["enabled"] = False
        adapters.append(entry)
    return adapters


def _searxng_bases(settings: Settings) -> dict[str, str]:
    return {
        _strip_query(adapter.base_url).rstrip("/") + "/search": adapter.id
        for adapter in settings.adapters
        if adapter.kind == "searxng" and adapter.base_url
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
    engines = _searxng_bases(settings)
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
            api.append(ApiEntry(url=url, **common, **extra))
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
    )
    return _WorldParts(manifest, files, tuple(scrubbed))


class NothingAnswered(ExternalQueryError):
    """No provider answered the recorded run (every request failed, or none was made);
    nothing was written. ``answer`` is the run's answer, whose attempts say why."""

    def __init__(self, answer: ExternalAnswer) -> None:
        self.answer = answer
        attempts = ", ".join(
            f"{item.adapter_id} {item.status}" + (f" ({item.reason})" if item.reason else "")
            for item in answer.attempts
        )
        super().__init__(f"no provider answered ({attempts or 'no adapter was tried'})")


@dataclass(frozen=True)
class RecordResult:
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
    with ExternalQueryService(live, clock=fixed_clock(moment), http=runtime) as service:
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
