"""What an adapter is: a declared capability, a cheap readiness check, a real probe, and
``gather(plan)`` that returns evidence and findings (never a verdict).

Third-party adapters subclass ``Adapter`` and register through the same registry as the
built-ins (``register_adapter`` or the ``external_query_service.adapters`` entry-point group).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, ClassVar, Protocol
from urllib.parse import urlsplit

from pydantic import JsonValue

from .._clock import Clock
from .._digests import sha256_digest
from .._evidence_store import EvidenceStore
from .._memo import ThreadMemo
from ..errors import NotRecorded, UpstreamStatus
from ..models import (
    AdapterCapability,
    AdapterOutcome,
    AttemptCause,
    Evidence,
    ExternalQueryPlan,
    Fact,
    ProviderType,
    Readiness,
)
from ..net._failures import status_failure_class
from ..net._sites import url_host_port
from ..settings import AdapterSettings, NetworkSettings, SourceSettings
from ._page_walk import RecordedWalks, WalkObserver
from .options import AdapterOptions

if TYPE_CHECKING:
    from ..net._fetch import ApiResponse, FetchedPage

__all__ = [
    "Adapter",
    "AdapterOutcome",
    "AdapterRuntime",
    "EndpointClient",
    "EndpointFactory",
    "FactLine",
    "PageFetcher",
    "ToolCall",
    "ToolObserver",
    "decimal_text",
    "evidence_id",
    "fact_evidence",
]


class PageFetcher(Protocol):
    """Fetches URLs that came from outside, under the network policy."""

    async def fetch(
        self,
        url: str,
        *,
        deadline: float | None = None,
        allow_redirect: Callable[[str], bool] | None = None,
    ) -> FetchedPage:
        """The page at ``url`` under the network policy, bounded in bytes and time (and by
        ``deadline``, event-loop time, when given); ``allow_redirect`` (when given) is asked
        about every redirect hop before it is requested."""
        ...


class EndpointClient(Protocol):
    """Calls one configured API origin (trusted at that exact origin only)."""

    @property
    def base_url(self) -> str:
        """The API root this client calls."""
        ...

    async def get_json(
        self,
        path: str,
        params: Mapping[str, str | int] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> ApiResponse:
        """GET ``path`` (relative to the root) with ``params``; the reply's JSON, bounded."""
        ...

    async def post_json(
        self, path: str, body: JsonValue, *, headers: Mapping[str, str] | None = None
    ) -> ApiResponse:
        """POST ``body`` as JSON to ``path``; the reply's JSON, bounded."""
        ...


class EndpointFactory(Protocol):
    """Builds the trusted client of a configured API root (the adapter's own origin only)."""

    def __call__(self, base_url: str) -> EndpointClient: ...


@dataclass(frozen=True)
class ToolCall:
    """One call an adapter made to a tool server outside HTTP (an MCP server over stdio):
    what it asked and what came back (the result as JSON, or the failure's reason)."""

    adapter_id: str
    tool: str
    arguments: Mapping[str, JsonValue]
    result: JsonValue = None
    #: Why the call failed (``deadline_exceeded``, ``server_closed`` ...); None on success.
    failure: str | None = None


class ToolObserver(Protocol):
    """Told of every ``ToolCall`` (a recording keeps them, to replay the server later)."""

    def __call__(self, call: ToolCall) -> None: ...


@dataclass(frozen=True)
class AdapterRuntime:
    """What the service hands every adapter: shared fetcher, store, clock and settings."""

    network: NetworkSettings
    fetcher: PageFetcher
    endpoint: EndpointFactory
    store: EvidenceStore
    clock: Clock
    #: Source policy, so search adapters do not fetch hosts the verifier would reject.
    sources: SourceSettings = field(default_factory=SourceSettings)
    #: Runs pure page work (decode, extract, score) in a thread, once per distinct input:
    #: identical work in flight is shared, and results are kept when the service caches.
    analyses: ThreadMemo = field(default_factory=ThreadMemo)

    #: Told of every call to a tool server outside HTTP; None: nobody listens.
    tool_observer: ToolObserver | None = None
    #: Told of how every page walk ended (a recording keeps it); None: nobody listens.
    walk_observer: WalkObserver | None = None
    #: The walks of a recorded world being replayed: a walk over hits the recording walked
    #: ends as the recorded one did (``_page_walk.RecordedWalks``); None: the walk's own rules.
    recorded_walks: RecordedWalks | None = None
    #: The trusted client of a search engine's API root (its replies are ``search`` cache
    #: hits, not ``api`` ones); None: ``endpoint``.
    search_endpoint: EndpointFactory | None = None
    #: The second pass judges gathered passages with the semantic answerability judgment
    #: (``[answerability] semantic``; ``text/_rerank.py``).
    semantic: bool = False

    def search_client(self, base_url: str) -> EndpointClient:
        """The client a search adapter calls its engine through."""
        return (self.search_endpoint or self.endpoint)(base_url)


class Adapter(ABC):
    """Base class for every adapter, built-in or third-party."""

    #: The ``kind`` used in settings (``[[adapters]] kind = "..."``).
    kind: ClassVar[str]
    provider_type: ClassVar[ProviderType]
    supported_query_kinds: ClassVar[tuple[str, ...]] = ()
    supports_freshness: ClassVar[bool] = False
    supports_page_fetch: ClassVar[bool] = False

    class Options(AdapterOptions):
        """The keys of the adapter's ``[[adapters]]`` table: none here. Subclasses declare
        ``class Options(Adapter.Options)`` with fields, and annotate ``options: Options``."""

    options: Options

    def __init__(self, config: AdapterSettings, runtime: AdapterRuntime) -> None:
        self.config = config
        self.options = config.options_as(self.Options)
        self.runtime = runtime

    @property
    def adapter_id(self) -> str:
        """The adapter's id: its settings id, or its kind when none was given."""
        return self.config.id

    @property
    def source(self) -> str | None:
        """The host this adapter's provider is reached at (its first outside endpoint, with
        the port its URL names), named to readers when it fails, never the adapter id;
        ``None`` for a local source."""
        endpoints = self.options.endpoints()
        urls = endpoints.urls.values() if endpoints is not None else ()
        return next((host for url in urls if (host := url_host_port(url))), None)

    @property
    def capability(self) -> AdapterCapability:
        """What this adapter declares it can do; ranking reads only this."""
        return AdapterCapability(
            adapter_id=self.adapter_id,
            kind=self.kind,
            provider_type=self.provider_type,
            supported_query_kinds=self.supported_query_kinds,
            supports_freshness=self.supports_freshness,
            supports_page_fetch=self.supports_page_fetch,
        )

    def readiness(self) -> Readiness:
        """Cheap, local readiness (configured, enabled). The gather itself is the real proof."""
        if not self.config.enabled:
            return Readiness(ready=False, reason="disabled")
        return Readiness(ready=True)

    async def probe(self) -> Readiness:
        """A real, bounded check that the provider answers. Default: the static readiness."""
        return self.readiness()

    def status_cause(self, status: int) -> AttemptCause:
        """What an HTTP ``status`` from this adapter's provider means, for the answer. The
        base knows one meaning every API shares: a 404 on a configured API path means the
        ``base_url`` path is wrong. A subclass adds its provider's own statuses."""
        if status == 404:
            return AttemptCause(status=status, meaning="wrong_base_url_path", setting="base_url")
        return AttemptCause(status=status)

    def failure_cause(self, exc: UpstreamStatus) -> AttemptCause:
        """What ``exc`` means for the answer: for a replayed world with no recording, the
        request it lacks; otherwise what the status means (``status_cause``)."""
        if isinstance(exc, NotRecorded):
            return AttemptCause(status=exc.status, meaning="not_recorded", request=exc.request)
        return self.status_cause(exc.status)

    def status_outcome(self, exc: UpstreamStatus, **detail: JsonValue) -> AdapterOutcome:
        """The failed outcome of a provider call answered with ``exc``'s status: its reason
        code (``not_recorded`` in a replay that lacks the request), whether retrying may
        help, and what the status means (``failure_cause``)."""
        not_recorded = isinstance(exc, NotRecorded)
        return AdapterOutcome(
            status="failed",
            reason=exc.reason if not_recorded else f"upstream_status_{exc.status}",
            failure=status_failure_class(exc.status),
            detail=detail,
            cause=self.failure_cause(exc),
        )

    @abstractmethod
    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        """Collect evidence for ``plan``. Report what was found; never judge it."""

    async def aclose(self) -> None:  # noqa: B027 (optional hook: most adapters hold nothing)
        """Release what the adapter holds on the running event loop (a server process it
        started). Called when the service closes; default: nothing to release."""


def evidence_id(url: str, content_digest: str, offset: int) -> str:
    """A short, stable id for a piece of evidence (same page span → same id)."""
    key = f"{url}\n{content_digest}\n{offset}".encode()
    return "ev-" + hashlib.sha256(key).hexdigest()[:12]


@dataclass(frozen=True)
class FactLine:
    """One stated fact of a fact-API reply, as the line of text a reader can quote."""

    snippet: str
    about: date
    published: date
    facts: tuple[Fact, ...]


def fact_evidence(
    adapter: Adapter,
    lines: Sequence[FactLine],
    *,
    url: str,
    raw_digest: str,
    accessed_at: datetime | None = None,
    title: str,
    gathered_for: str | None,
    aliases: tuple[str, ...],
    metadata: Mapping[str, str],
) -> tuple[Evidence, ...]:
    """Evidence for a fact-API reply: one stored text with a line per fact, and one evidence
    per line pointing at it (``store.quote(ref, offset, length) == snippet``).
    ``accessed_at``: when the reply came from the provider (a kept reply keeps the time of
    its real call); the clock's now when not given."""
    text = "\n".join(line.snippet for line in lines)
    store = adapter.runtime.store
    ref = store.put(text, source=url, metadata={"adapter_id": adapter.adapter_id, **metadata})
    content_digest = sha256_digest(text)
    accessed_at = (accessed_at or adapter.runtime.clock()).astimezone(UTC)
    site = urlsplit(url).hostname or url
    evidence = []
    offset = 0
    for line in lines:
        evidence.append(
            Evidence(
                evidence_id=evidence_id(url, content_digest, offset),
                adapter_id=adapter.adapter_id,
                provider_type=adapter.provider_type,
                basis="fact_api",
                url=url,
                title=title,
                site=site,
                snippet=line.snippet,
                score=10_000,
                published_at=line.published,
                about_dates=(line.about,),
                accessed_at=accessed_at,
                content_digest=content_digest,
                raw_digest=raw_digest,
                ref=ref,
                offset=offset,
                length=len(line.snippet),
                gathered_for=gathered_for,
                aliases=aliases,
                facts=line.facts,
            )
        )
        offset += len(line.snippet) + 1
    return tuple(evidence)


def decimal_text(value: JsonValue) -> str | None:
    """A JSON number as a decimal string that keeps its value; None for null or non-numbers.

    Measurements enter evidence as these strings, never as floats (hashed records hold none).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return str(value)
    if value != value or value in (float("inf"), float("-inf")):
        return None
    text = repr(value)
    # repr is the shortest round-trip form; only exponent notation needs spelling out.
    return format(Decimal(text), "f") if "e" in text or "E" in text else text
