"""The Frankfurter v1 adapter against a loopback server speaking the documented JSON formats."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from external_query_service._clock import fixed_clock
from external_query_service._digests import sha256_digest
from external_query_service._evidence_store import EvidenceStore
from external_query_service.adapters._base import AdapterRuntime
from external_query_service.adapters._frankfurter import FrankfurterAdapter, currency_pair
from external_query_service.models import ExternalQueryPlan, Readiness, TimeRange
from external_query_service.settings import AdapterSettings, NetworkSettings
from external_query_service.testing import LoopbackServer, json_reply
from tests.support.fact_runtime import Endpoints, NoFetcher, gather, run

NOW = datetime(2025, 5, 17, 9, 30, tzinfo=UTC)
HOST = "fx.test"


def _adapter(server: LoopbackServer, store: EvidenceStore | None = None) -> FrankfurterAdapter:
    network = NetworkSettings(resolve={HOST: "127.0.0.1"})
    runtime = AdapterRuntime(
        network=network,
        fetcher=NoFetcher(),
        endpoint=Endpoints(network),
        store=store if store is not None else EvidenceStore(),
        clock=fixed_clock(NOW),
    )
    config = AdapterSettings(kind="frankfurter", id="fx", base_url=server.url("/v1", host=HOST))
    return FrankfurterAdapter(config, runtime)


def _plan(
    entities: tuple[str, ...] = ("USD", "CNY"), time_range: TimeRange | None = None
) -> ExternalQueryPlan:
    return ExternalQueryPlan(
        question="美元兑人民币汇率",
        query_kind="exchange_rate",
        answer_contract="direct_fact",
        search_queries=("美元兑人民币汇率",),
        entities=entities,
        time_range=time_range,
        freshness_required=True,
    )


def _day(day: date) -> TimeRange:
    return TimeRange(start=day, end=day)


def test_latest_rate_becomes_one_quotable_fact(loopback: LoopbackServer) -> None:
    body = {"amount": 1.0, "base": "USD", "date": "2025-05-16", "rates": {"CNY": 7.2093}}
    loopback.route("/v1/latest", json_reply(body))
    store = EvidenceStore()

    outcome = gather(_adapter(loopback, store), _plan())

    assert outcome.status == "ok"
    (request,) = loopback.requests_to("/v1/latest", host=HOST)
    assert request.query == {"from": ["USD"], "to": ["CNY"]}
    (item,) = outcome.evidence
    assert item.snippet == "2025-05-16 欧洲央行参考汇率：1 USD = 7.2093 CNY"
    assert item.ref is not None
    assert store.quote(item.ref, item.offset, item.length) == item.snippet
    assert item.content_digest == sha256_digest(item.snippet)
    assert item.about_dates == (date(2025, 5, 16),)
    assert item.published_at == date(2025, 5, 16)
    assert item.aliases == ("USD", "CNY", "USD/CNY")
    assert [(f.name, f.value) for f in item.facts if f.name == "rate"] == [("rate", "7.2093")]
    assert item.url == f"http://{HOST}:{loopback.port}/v1/latest?from=USD&to=CNY"
    assert item.site == HOST
    assert item.score == 10_000
    assert (item.basis, item.provider_type, item.adapter_id) == ("fact_api", "fact_api", "fx")
    assert item.accessed_at == NOW
    assert item.raw_digest.startswith("sha256:")
    assert item.raw_digest != item.content_digest


def test_a_weekend_day_reports_the_working_day_the_provider_returned(
    loopback: LoopbackServer,
) -> None:
    # Saturday 17 May: the API carries Friday's rate forward and says so in ``date``.
    body = {"amount": 1.0, "base": "USD", "date": "2025-05-16", "rates": {"CNY": 7.2093}}
    loopback.route("/v1/2025-05-17", json_reply(body))

    outcome = gather(_adapter(loopback), _plan(time_range=_day(date(2025, 5, 17))))

    (request,) = loopback.requests_to("/v1/2025-05-17")
    assert request.query == {"from": ["USD"], "to": ["CNY"]}
    (item,) = outcome.evidence
    assert item.about_dates == (date(2025, 5, 16),)
    assert item.published_at == date(2025, 5, 16)


def test_a_date_range_reads_the_time_series_one_evidence_per_date(
    loopback: LoopbackServer,
) -> None:
    body = {
        "amount": 1.0,
        "base": "USD",
        "start_date": "2024-01-02",
        "end_date": "2024-01-05",
        "rates": {
            "2024-01-02": {"CNY": 7.1413},
            "2024-01-03": {"CNY": 7.1497},
            "2024-01-04": {"CNY": 7.1498},
            "2024-01-05": {"CNY": 7.1562},
        },
    }
    loopback.route("/v1/2024-01-01..2024-01-05", json_reply(body))
    store = EvidenceStore()
    span = TimeRange(start=date(2024, 1, 1), end=date(2024, 1, 5))

    outcome = gather(_adapter(loopback, store), _plan(time_range=span))

    assert len(loopback.requests_to("/v1/2024-01-01..2024-01-05")) == 1
    assert [item.about_dates for item in outcome.evidence] == [
        (date(2024, 1, 2),),
        (date(2024, 1, 3),),
        (date(2024, 1, 4),),
        (date(2024, 1, 5),),
    ]
    assert outcome.evidence[3].snippet == "2024-01-05 欧洲央行参考汇率：1 USD = 7.1562 CNY"
    for item in outcome.evidence:
        assert item.ref is not None
        assert store.quote(item.ref, item.offset, item.length) == item.snippet
    assert len({item.evidence_id for item in outcome.evidence}) == 4


def test_a_long_series_keeps_the_most_recent_31_dates(loopback: LoopbackServer) -> None:
    first = date(2024, 1, 1)
    days = [first + timedelta(days=n) for n in range(40)]
    rates = {day.isoformat(): {"CNY": 7 + n / 100} for n, day in enumerate(days)}
    body = {"amount": 1.0, "base": "USD", "rates": rates}
    loopback.route(f"/v1/{days[0]}..{days[-1]}", json_reply(body))

    outcome = gather(_adapter(loopback), _plan(time_range=TimeRange(start=days[0], end=days[-1])))

    assert len(outcome.evidence) == 31
    assert outcome.evidence[0].about_dates == (days[9],)
    assert outcome.evidence[-1].about_dates == (days[-1],)
    assert outcome.results == 40
    assert outcome.detail == {"omitted_dates": 9}


def test_currency_codes_are_taken_by_shape_base_first() -> None:
    assert currency_pair(("美元", "usd", "人民币", "cny", "eur")) == ("USD", "CNY")
    assert currency_pair(("USD", "usd")) is None
    assert currency_pair(("US1", "ÄBC", "EUR")) is None
    assert currency_pair(("EUR", "JPY")) == ("EUR", "JPY")


def test_fewer_than_two_codes_is_a_missing_slot_without_any_request(
    loopback: LoopbackServer,
) -> None:
    outcome = gather(_adapter(loopback), _plan(entities=("美元", "USD")))

    assert (outcome.status, outcome.reason) == ("empty", "missing_currency_pair")
    assert [(f.kind, f.slot) for f in outcome.findings] == [("missing_slot", "currency_pair")]
    assert loopback.requests == []


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (404, "not found", ("empty", "not_found")),
        (422, "bad currency pair", ("empty", "bad_request")),
        (500, "internal error", ("failed", "upstream_status_500")),
    ],
)
def test_error_statuses_map_to_outcomes(
    loopback: LoopbackServer, status: int, message: str, expected: tuple[str, str]
) -> None:
    loopback.route("/v1/latest", json_reply({"message": message}, status=status))

    outcome = gather(_adapter(loopback), _plan(entities=("USD", "XYZ")))

    assert (outcome.status, outcome.reason) == expected
    assert outcome.evidence == ()


def test_a_reply_without_the_quote_currency_is_empty(loopback: LoopbackServer) -> None:
    body = {"amount": 1.0, "base": "USD", "date": "2025-05-16", "rates": {}}
    loopback.route("/v1/latest", json_reply(body))

    outcome = gather(_adapter(loopback), _plan())

    assert (outcome.status, outcome.reason) == ("empty", "no_data")


def test_probe_reads_the_currency_list(loopback: LoopbackServer) -> None:
    loopback.route("/v1/currencies", json_reply({"CNY": "Chinese Renminbi Yuan", "USD": "US"}))
    adapter = _adapter(loopback)

    assert run(adapter, adapter.probe()) == Readiness(ready=True)
    assert len(loopback.requests_to("/v1/currencies", host=HOST)) == 1

    loopback.route("/v1/currencies", json_reply({"message": "down"}, status=502))
    assert run(adapter, adapter.probe()) == Readiness(ready=False, reason="upstream_status_502")


def test_capability_is_declared_as_data(loopback: LoopbackServer) -> None:
    capability = _adapter(loopback).capability
    assert (capability.kind, capability.provider_type) == ("frankfurter", "fact_api")
    assert capability.supported_query_kinds == ("exchange_rate",)
    assert capability.supports_freshness is True


def test_the_providers_currency_list_keeps_a_non_currency_entity_out_of_the_pair(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/v1/currencies", json_reply({"USD": "US Dollar", "CNY": "Chinese Yuan"}))
    loopback.route(
        "/v1/latest",
        json_reply({"amount": 1.0, "base": "USD", "date": "2026-11-27", "rates": {"CNY": 7.1}}),
    )
    adapter = _adapter(loopback)
    outcome = gather(adapter, _plan(entities=("USD", "GDP", "CNY")))
    again = gather(adapter, _plan(entities=("USD", "CNY")))

    assert outcome.status == "ok"
    (request, *_) = [r for r in loopback.requests if r.path == "/v1/latest"]
    assert (request.query["from"], request.query["to"]) == (["USD"], ["CNY"])
    assert again.status == "ok"
    assert len([r for r in loopback.requests if r.path == "/v1/currencies"]) == 1
