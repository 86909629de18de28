"""What an adapter is: a declared capability, a cheap readiness check, a real probe, and
``gather(plan)`` that returns evidence and findings (never a verdict).

Third-party adapters subclass ``Adapter`` and register through the same registry as the
built-ins (``register_adapter`` or the ``external_query_service.adapters`` entry-point group).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol

from pydantic import JsonValue

from ..clock import Clock
from ..models import (
    AdapterCapability,
    Evidence,
    ExternalQueryPlan,
    Finding,
    ProviderType,
    Readiness,
)
from ..settings import AdapterSettings, NetworkSettings, SourceSettings
from ..store import EvidenceStore

if TYPE_CHECKING:
    from ..gateway.fetch import ApiResponse, FetchedPage

__all__ = [
    "Adapter",
    "AdapterOutcome",
    "AdapterRuntime",
    "EndpointClient",
    "PageFetcher",
    "evidence_id",
]


class PageFetcher(Protocol):
    """Fetches URLs that came from outside, under the network policy."""

    async def fetch(self, url: str) -> FetchedPage: ...


class EndpointClient(Protocol):
    """Calls one configured API origin (trusted at that exact origin only)."""

    @property
    def base_url(self) -> str: ...

    async def get_json(
        self, path: str, params: Mapping[str, str | int] | None = None
    ) -> ApiResponse: ...


class EndpointFactory(Protocol):
    def __call__(self, base_url: str) -> EndpointClient: ...


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


@dataclass(frozen=True)
class AdapterOutcome:
    """What one ``gather`` produced. ``status`` ``failed`` must carry a reason code."""

    status: Literal["ok", "empty", "failed"]
    reason: str | None = None
    evidence: tuple[Evidence, ...] = ()
    findings: tuple[Finding, ...] = ()
    results: int = 0
    pages_fetched: int = 0
    pages_failed: int = 0
    detail: dict[str, JsonValue] = field(default_factory=dict)


class Adapter(ABC):
    """Base class for every adapter, built-in or third-party."""

    #: The ``kind`` used in settings (``[[adapters]] kind = "..."``).
    kind: ClassVar[str]
    provider_type: ClassVar[ProviderType]
    supported_query_kinds: ClassVar[tuple[str, ...]] = ()
    supports_freshness: ClassVar[bool] = False
    supports_page_fetch: ClassVar[bool] = False

    def __init__(self, config: AdapterSettings, runtime: AdapterRuntime) -> None:
        self.config = config
        self.runtime = runtime

    @property
    def adapter_id(self) -> str:
        return self.config.id

    @property
    def capability(self) -> AdapterCapability:
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

    @abstractmethod
    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        """Collect evidence for ``plan``. Report what was found; never judge it."""


def evidence_id(url: str, content_digest: str, offset: int) -> str:
    """A short, stable id for a piece of evidence (same page span → same id)."""
    key = f"{url}\n{content_digest}\n{offset}".encode()
    return "ev-" + hashlib.sha256(key).hexdigest()[:12]
