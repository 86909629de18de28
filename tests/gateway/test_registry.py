"""Third-party adapters register exactly like the built-ins, and rank by what they declare."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC
from pathlib import Path
from typing import ClassVar

import pytest

from external_query_service import (
    Adapter,
    AdapterOutcome,
    ExternalQueryService,
    InvalidQuery,
    Settings,
    UnknownAdapterKind,
    fixed_clock,
    register_adapter,
)
from external_query_service._audit import AuditLog
from external_query_service._digests import sha256_digest
from external_query_service._evidence_store import EvidenceStore
from external_query_service.adapters._base import AdapterRuntime, evidence_id
from external_query_service.errors import FetchError
from external_query_service.gateway import _registry as registry
from external_query_service.gateway._gateway import Gateway
from external_query_service.models import (
    Evidence,
    ExternalQueryPlan,
    ProviderType,
    Readiness,
)
from external_query_service.settings import (
    AdapterSettings,
    NetworkSettings,
    SourceSettings,
    VerifierSettings,
)
from external_query_service.testing import LoopbackServer, json_reply
from tests.support.quote_adapter import QuoteAdapter
from tests.support.world import NOW


def test_a_registered_third_party_fact_api_answers_its_kind(loopback: LoopbackServer) -> None:
    register_adapter("test_quotes", QuoteAdapter, replace=True)
    loopback.route("/q/quote", json_reply({"price": 1688.5, "date": "2026-11-27"}))
    settings = Settings.from_mapping(
        {
            "adapters": [
                {"kind": "test_quotes", "id": "quotes", "base_url": loopback.url("/q")},
                {"kind": "searxng", "id": "searx", "base_url": loopback.url("/searx")},
            ]
        }
    )
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        answer = service.answer(
            "贵州茅台最新收盘价？",
            {
                "query_kind": "stock_quote",
                "entities": ["600519"],
                "time_range": {"start": "2026-11-27", "end": "2026-11-27"},
            },
        )
    assert answer.status == "answered"
    assert answer.attempts[0].adapter_id == "quotes"
    assert "1688.5" in answer.text
    assert loopback.requests_to("/q/quote")[0].query["symbol"] == ["600519"]


def test_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(UnknownAdapterKind) as caught:
        ExternalQueryService(Settings.from_mapping({"adapters": [{"kind": "telepathy"}]}))
    assert "searxng" in str(caught.value)


def test_entry_point_plugins_are_discovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "eqs_demo_plugin.py").write_text(
        "from tests.support.quote_adapter import QuoteAdapter\n"
        "class DemoAdapter(QuoteAdapter):\n    kind = 'demo_plugin'\n",
        encoding="utf-8",
    )
    info = tmp_path / "eqs_demo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: eqs-demo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[external_query_service.adapters]\ndemo_plugin = eqs_demo_plugin:DemoAdapter\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_loaded_entry_points", False)
    assert "demo_plugin" in registry.known_kinds()
    assert registry.adapter_class("demo_plugin").__name__ == "DemoAdapter"
    sys.modules.pop("eqs_demo_plugin", None)


# -- the gateway with registered doubles ---------------------------------------------------------


class CannedSearch(Adapter):
    """A live_search double answering with one hit on a fixed site."""

    kind: ClassVar[str] = "test_canned_search"
    provider_type: ClassVar[ProviderType] = "live_search"
    supports_page_fetch: ClassVar[bool] = True

    class Options(Adapter.Options):
        site: str

    options: Options

    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        site = self.options.site
        url = f"https://{site}/story"
        text = f"{plan.question} — {site}"
        return AdapterOutcome(
            status="ok",
            results=1,
            evidence=(
                Evidence(
                    evidence_id=evidence_id(url, sha256_digest(text), 0),
                    adapter_id=self.adapter_id,
                    provider_type="live_search",
                    basis="page_body",
                    url=url,
                    site=site,
                    snippet=text,
                    score=9000,
                    accessed_at=NOW.astimezone(UTC),
                    content_digest=sha256_digest(text),
                    raw_digest=sha256_digest(text),
                    length=len(text),
                ),
            ),
        )


class SlowProbe(CannedSearch):
    kind: ClassVar[str] = "test_slow_probe"

    async def probe(self) -> Readiness:
        await asyncio.sleep(3600)
        raise AssertionError("the probe should have been cut off")


class FailingProbe(CannedSearch):
    kind: ClassVar[str] = "test_failing_probe"

    async def probe(self) -> Readiness:
        raise FetchError("http://search.test/config", "refused", reason="connect_failed")


def canned(
    adapter_id: str, site: str, *, deny: tuple[str, ...] = (), cls: type[Adapter] = CannedSearch
) -> Adapter:
    runtime = AdapterRuntime(
        network=NetworkSettings(),
        fetcher=None,  # type: ignore[arg-type]
        endpoint=None,  # type: ignore[arg-type]
        store=EvidenceStore(),
        clock=fixed_clock(NOW),
        sources=SourceSettings(deny_domains=deny),
    )
    config = AdapterSettings.model_validate({"kind": cls.kind, "id": adapter_id, "site": site})
    return cls(config, runtime)


def web_plan() -> ExternalQueryPlan:
    return ExternalQueryPlan(
        question="湛江港新闻", query_kind="news", search_queries=("湛江港新闻",)
    )


def test_a_search_that_found_only_denied_sites_does_not_stop_the_failover() -> None:
    deny = ("spam.test",)
    gateway = Gateway(
        [
            canned("a-search", "news.spam.test", deny=deny),
            canned("b-search", "port.test", deny=deny),
        ],
        deadline_s=10,
    )
    gathered = asyncio.run(gateway.gather(web_plan(), AuditLog()))
    assert [(a.adapter_id, a.status) for a in gathered.attempts] == [
        ("a-search", "ok"),
        ("b-search", "ok"),
    ]
    assert {item.site for item in gathered.gathered} == {"news.spam.test", "port.test"}


def test_enough_evidence_from_the_first_search_skips_the_next_with_a_reason() -> None:
    gateway = Gateway(
        [canned("a-search", "news-a.test"), canned("b-search", "news-b.test")], deadline_s=10
    )
    gathered = asyncio.run(gateway.gather(web_plan(), AuditLog()))
    assert [(a.adapter_id, a.status, a.reason) for a in gathered.attempts] == [
        ("a-search", "ok", None),
        ("b-search", "skipped", "enough_evidence"),
    ]


def test_every_probe_is_bounded_and_failures_keep_their_reason() -> None:
    disabled = canned("d-search", "x.test")
    disabled.config = disabled.config.model_copy(update={"enabled": False})
    gateway = Gateway(
        [
            canned("a-ready", "a.test"),
            canned("b-slow", "b.test", cls=SlowProbe),
            canned("c-failing", "c.test", cls=FailingProbe),
            disabled,
        ],
        deadline_s=0.2,
    )
    assert asyncio.run(gateway.probe()) == {
        "a-ready": Readiness(ready=True),
        "b-slow": Readiness(ready=False, reason="probe_timeout"),
        "c-failing": Readiness(ready=False, reason="connect_failed"),
        "d-search": Readiness(ready=False, reason="disabled"),
    }


class PortAdapter(QuoteAdapter):
    kind: ClassVar[str] = "test_ports"
    supported_query_kinds: ClassVar[tuple[str, ...]] = ("port_throughput",)


def test_a_kind_is_known_once_a_configured_adapter_declares_it() -> None:
    register_adapter("test_ports", PortAdapter, replace=True)
    question = ("湛江港吞吐量", {"query_kind": "port_throughput"})
    with ExternalQueryService(Settings()) as bare, pytest.raises(InvalidQuery) as raised:
        bare.answer(*question)
    assert raised.value.reason == "unknown_query_kind"
    settings = Settings.from_mapping(
        {"adapters": [{"kind": "test_ports", "base_url": "http://127.0.0.1:9"}]}
    )
    with ExternalQueryService(settings) as service:
        assert "port_throughput" in service.query_kinds
        answer = service.answer(*question)
    assert answer.plan.query_kind == "port_throughput"


def test_a_comparison_without_targets_keeps_searching_until_the_per_target_bar_is_met() -> None:
    # The verifier holds a comparison without targets to the per-target bar (two sites
    # here), so the gateway does not stop at the summary bar (one site).
    gateway = Gateway(
        [canned("a-search", "news-a.test"), canned("b-search", "news-b.test")],
        deadline_s=10,
        needs=VerifierSettings(min_sources_summary=1, min_sources_per_compare_target=2),
    )
    compare = web_plan().model_copy(update={"answer_contract": "compare_with_sources"})
    gathered = asyncio.run(gateway.gather(compare, AuditLog()))
    assert [(a.adapter_id, a.status) for a in gathered.attempts] == [
        ("a-search", "ok"),
        ("b-search", "ok"),
    ]


def test_a_direct_fact_with_compare_targets_stops_at_its_own_bar_like_the_verifier() -> None:
    # Neither target is named by the canned pages: the verifier holds a direct_fact to its
    # count over the bundle, not to per-target coverage, so one site is enough here.
    gateway = Gateway(
        [canned("a-search", "news-a.test"), canned("b-search", "news-b.test")], deadline_s=10
    )
    fact = web_plan().model_copy(
        update={"answer_contract": "direct_fact", "compare_targets": ("甲港", "乙港")}
    )
    gathered = asyncio.run(gateway.gather(fact, AuditLog()))
    assert [(a.adapter_id, a.status, a.reason) for a in gathered.attempts] == [
        ("a-search", "ok", None),
        ("b-search", "skipped", "enough_evidence"),
    ]
