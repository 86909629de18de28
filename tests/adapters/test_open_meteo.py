"""The Open-Meteo adapter against a loopback server speaking the documented JSON formats."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from external_query_service._clock import fixed_clock
from external_query_service._digests import sha256_digest
from external_query_service._evidence_store import EvidenceStore
from external_query_service.adapters._base import AdapterRuntime
from external_query_service.adapters._open_meteo import OpenMeteoAdapter
from external_query_service.adapters._weather_codes import WMO_WEATHER_ZH, weather_description
from external_query_service.models import ExternalQueryPlan, Readiness, TimeRange
from external_query_service.settings import AdapterSettings, NetworkSettings
from external_query_service.testing import LoopbackServer, json_reply
from tests.support.fact_runtime import Endpoints, NoFetcher, gather, run
from tests.support.world import closed_port, forecast_body

#: 20:00 UTC on 30 November is already 1 December in China.
NOW = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
FORECAST_HOST = "api.meteo.test"
GEOCODING_HOST = "geo.meteo.test"

ZHANJIANG = {
    "id": 1791748,
    "name": "湛江市",
    "latitude": 21.28145,
    "longitude": 110.34271,
    "elevation": 20.0,
    "feature_code": "PPLA2",
    "country_code": "CN",
    "timezone": "Asia/Shanghai",
    "country": "中国",
    "admin1": "广东省",
}


def _adapter(
    server: LoopbackServer,
    *,
    base_url: str | None = None,
    store: EvidenceStore | None = None,
) -> OpenMeteoAdapter:
    network = NetworkSettings(resolve={FORECAST_HOST: "127.0.0.1", GEOCODING_HOST: "127.0.0.1"})
    runtime = AdapterRuntime(
        network=network,
        fetcher=NoFetcher(),
        endpoint=Endpoints(network),
        store=store if store is not None else EvidenceStore(),
        clock=fixed_clock(NOW),
    )
    config = AdapterSettings(
        kind="open_meteo",
        id="weather",
        base_url=base_url or server.url("/v1", host=FORECAST_HOST),
        geocoding_url=server.url("/v1", host=GEOCODING_HOST),
    )
    return OpenMeteoAdapter(config, runtime)


def _plan(location: str | None = "湛江", time_range: TimeRange | None = None) -> ExternalQueryPlan:
    return ExternalQueryPlan(
        question="湛江天气怎么样",
        query_kind="weather",
        answer_contract="direct_fact",
        search_queries=("湛江天气",),
        location=location,
        time_range=time_range,
        freshness_required=True,
    )


def _one(values: list[str]) -> str:
    assert len(values) == 1, values
    return values[0]


def test_forecast_for_a_place_gives_one_quotable_evidence_per_local_day(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG], "generationtime_ms": 0.7}))
    loopback.route("/v1/forecast", json_reply(forecast_body(["2026-12-01", "2026-12-02"])))
    store = EvidenceStore()
    adapter = _adapter(loopback, store=store)
    span = TimeRange(start=date(2026, 12, 1), end=date(2026, 12, 2))

    outcome = gather(adapter, _plan(time_range=span))

    assert outcome.status == "ok"
    assert outcome.reason is None
    forecast = _one_request(loopback, "/v1/forecast", FORECAST_HOST)
    assert _one(forecast["latitude"]) == "21.28145"
    assert _one(forecast["longitude"]) == "110.34271"
    assert _one(forecast["timezone"]) == "auto"
    assert _one(forecast["start_date"]) == "2026-12-01"
    assert _one(forecast["end_date"]) == "2026-12-02"
    assert _one(forecast["daily"]).split(",") == [
        "weather_code",
        "temperature_2m_max",
        "temperature_2m_min",
        "precipitation_sum",
        "precipitation_probability_max",
    ]
    first, second = outcome.evidence
    assert first.snippet == (
        "湛江市（广东省，中国）2026-12-01 天气：阴；最高 24.1 °C，最低 18.0 °C；"
        "降水 0.0 mm；降水概率 10%"
    )
    assert first.about_dates == (date(2026, 12, 1),)
    assert second.about_dates == (date(2026, 12, 2),)
    assert second.snippet.startswith("湛江市（广东省，中国）2026-12-02 天气：阴")
    assert first.evidence_id != second.evidence_id
    for item in outcome.evidence:
        assert item.ref is not None
        assert store.quote(item.ref, item.offset, item.length) == item.snippet
        assert item.content_digest == sha256_digest(store.quote(item.ref, 0, 10_000))
        assert item.basis == "fact_api"
        assert item.provider_type == "fact_api"
        assert item.adapter_id == "weather"
        assert item.site == FORECAST_HOST
        assert item.title == "Open-Meteo 天气预报：湛江市"
        assert item.url.startswith(f"http://{FORECAST_HOST}:{loopback.port}/v1/forecast?")
        assert "start_date=2026-12-01" in item.url
        assert item.score == 10_000
        assert item.published_at == date(2026, 12, 1)
        assert item.accessed_at == NOW
        assert item.accessed_at.utcoffset() is not None
        assert item.gathered_for == "湛江"
        assert item.aliases == ("湛江市",)
        assert item.raw_digest.startswith("sha256:")
    facts = {fact.name: (fact.value, fact.unit) for fact in first.facts}
    assert facts == {
        "weather_code": ("3", "wmo code"),
        "weather": ("阴", ""),
        "temperature_max": ("24.1", "°C"),
        "temperature_min": ("18.0", "°C"),
        "precipitation_sum": ("0.0", "mm"),
        "precipitation_probability_max": ("10", "%"),
    }


def _one_request(server: LoopbackServer, path: str, host: str) -> dict[str, list[str]]:
    requests = server.requests_to(path, host=host)
    assert len(requests) == 1, requests
    return requests[0].query


def test_without_a_time_range_today_at_the_place_is_requested(loopback: LoopbackServer) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG]}))
    loopback.route("/v1/forecast", json_reply(forecast_body(["2026-12-01"])))

    outcome = gather(_adapter(loopback), _plan())

    forecast = _one_request(loopback, "/v1/forecast", FORECAST_HOST)
    # The UTC date is still 30 November; Zhanjiang's local date is what counts.
    assert _one(forecast["start_date"]) == "2026-12-01"
    assert _one(forecast["end_date"]) == "2026-12-01"
    assert [item.published_at for item in outcome.evidence] == [date(2026, 12, 1)]


def test_geocoding_asks_for_ten_candidates_in_the_plan_language(loopback: LoopbackServer) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG]}))
    loopback.route("/v1/forecast", json_reply(forecast_body(["2026-12-01"])))

    gather(_adapter(loopback), _plan().model_copy(update={"language": "en"}))

    search = _one_request(loopback, "/v1/search", GEOCODING_HOST)
    assert _one(search["name"]) == "湛江"
    assert _one(search["count"]) == "10"
    assert _one(search["language"]) == "en"
    assert _one(search["format"]) == "json"


def test_a_regional_language_tag_is_sent_as_its_primary_subtag(loopback: LoopbackServer) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG]}))
    loopback.route("/v1/forecast", json_reply(forecast_body(["2026-12-01"])))

    gather(_adapter(loopback), _plan().model_copy(update={"language": "zh-CN"}))

    assert _one(_one_request(loopback, "/v1/search", GEOCODING_HOST)["language"]) == "zh"


def test_null_values_read_as_unknown_and_leave_the_facts(loopback: LoopbackServer) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG]}))
    body = forecast_body(
        ["2026-12-01"],
        weather_code=[None],
        temperature_2m_max=[None],
        precipitation_probability_max=[None],
    )
    loopback.route("/v1/forecast", json_reply(body))

    (item,) = gather(_adapter(loopback), _plan()).evidence

    assert item.snippet == (
        "湛江市（广东省，中国）2026-12-01 天气：未知；最高 未知，最低 18.0 °C；"
        "降水 0.0 mm；降水概率 未知"
    )
    assert [fact.name for fact in item.facts] == ["temperature_min", "precipitation_sum"]


def test_an_ambiguous_name_reports_every_candidate_and_uses_the_first(
    loopback: LoopbackServer,
) -> None:
    taiping_gd = {**ZHANJIANG, "name": "太平镇", "admin1": "广东省", "latitude": 23.1}
    taiping_sc = {
        **ZHANJIANG,
        "name": "太平镇",
        "admin1": "四川省",
        "latitude": 29.5,
        "population": 41000,
    }
    loopback.route("/v1/search", json_reply({"results": [taiping_gd, taiping_sc]}))
    loopback.route("/v1/forecast", json_reply(forecast_body(["2026-12-01"])))

    outcome = gather(_adapter(loopback), _plan(location="太平镇"))

    assert outcome.status == "ok"  # the adapter reports; the verifier decides on clarify
    (finding,) = outcome.findings
    assert finding.kind == "place_candidates"
    assert finding.slot == "location"
    assert finding.adapter_id == "weather"
    assert [(c.name, c.admin1, c.latitude) for c in finding.candidates] == [
        ("太平镇", "广东省", "23.1"),
        ("太平镇", "四川省", "29.5"),
    ]
    assert finding.candidates[0].label == "太平镇，广东省，中国"
    assert finding.candidates[1].population == 41000
    assert _one(_one_request(loopback, "/v1/forecast", FORECAST_HOST)["latitude"]) == "23.1"


def test_a_place_the_geocoder_does_not_know_is_empty_without_a_forecast(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/v1/search", json_reply({"generationtime_ms": 0.3}))

    outcome = gather(_adapter(loopback), _plan(location="不存在的地方"))

    assert (outcome.status, outcome.reason) == ("empty", "location_not_found")
    assert outcome.evidence == ()
    assert loopback.requests_to("/v1/forecast") == []


def test_missing_location_is_reported_as_a_slot_without_any_request(
    loopback: LoopbackServer,
) -> None:
    outcome = gather(_adapter(loopback), _plan(location=None))

    assert (outcome.status, outcome.reason) == ("empty", "missing_location")
    assert [(f.kind, f.slot) for f in outcome.findings] == [("missing_slot", "location")]
    assert loopback.requests == []


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (date(2026, 8, 30), date(2026, 8, 30)),  # 93 days back
        (date(2026, 12, 1), date(2026, 12, 17)),  # 16 days ahead
    ],
)
def test_dates_outside_the_forecast_window_are_empty_without_a_forecast(
    loopback: LoopbackServer, start: date, end: date
) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG]}))

    outcome = gather(_adapter(loopback), _plan(time_range=TimeRange(start=start, end=end)))

    assert (outcome.status, outcome.reason) == ("empty", "outside_forecast_window")
    assert [f.kind for f in outcome.findings] == ["place_candidates"]
    assert loopback.requests_to("/v1/forecast") == []


def test_window_edges_are_inside_the_forecast_window(loopback: LoopbackServer) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG]}))
    loopback.route("/v1/forecast", json_reply(forecast_body(["2026-08-31"])))
    span = TimeRange(start=date(2026, 8, 31), end=date(2026, 12, 16))

    outcome = gather(_adapter(loopback), _plan(time_range=span))

    assert outcome.status == "ok"
    assert len(loopback.requests_to("/v1/forecast")) == 1


def test_a_forecast_server_error_fails_with_its_status(loopback: LoopbackServer) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG]}))
    loopback.route("/v1/forecast", json_reply({"error": True, "reason": "boom"}, status=500))

    outcome = gather(_adapter(loopback), _plan())

    assert (outcome.status, outcome.reason) == ("failed", "upstream_status_500")
    assert outcome.evidence == ()


def test_a_geocoding_rate_limit_fails_with_its_status(loopback: LoopbackServer) -> None:
    limited = {"error": True, "reason": "Minutely API request limit exceeded."}
    loopback.route("/v1/search", json_reply(limited, status=429))

    outcome = gather(_adapter(loopback), _plan())

    assert (outcome.status, outcome.reason) == ("failed", "upstream_status_429")
    assert loopback.requests_to("/v1/forecast") == []


def test_an_unreachable_forecast_endpoint_fails_with_the_fetch_reason(
    loopback: LoopbackServer,
) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG]}))
    adapter = _adapter(loopback, base_url=f"http://127.0.0.1:{closed_port()}/v1")

    outcome = gather(adapter, _plan())

    assert outcome.status == "failed"
    assert outcome.reason
    assert not outcome.reason.startswith("upstream_status")


def test_probe_is_ready_only_when_both_endpoints_answer(loopback: LoopbackServer) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG]}), host=GEOCODING_HOST)
    loopback.route("/v1/forecast", json_reply(forecast_body(["2026-12-01"])), host=FORECAST_HOST)
    adapter = _adapter(loopback)

    assert run(adapter, adapter.probe()) == Readiness(ready=True)

    loopback.route("/v1/forecast", json_reply({"error": True}, status=503), host=FORECAST_HOST)
    assert run(adapter, adapter.probe()) == Readiness(ready=False, reason="upstream_status_503")
    assert _one(loopback.requests_to("/v1/search")[0].query["count"]) == "1"


def test_capability_is_declared_as_data(loopback: LoopbackServer) -> None:
    capability = _adapter(loopback).capability
    assert capability.provider_type == "fact_api"
    assert capability.supported_query_kinds == ("weather",)
    assert capability.supports_freshness is True
    assert capability.supports_page_fetch is False
    assert capability.kind == "open_meteo"


def test_wmo_table_holds_exactly_the_documented_codes_including_97() -> None:
    assert sorted(WMO_WEATHER_ZH) == [
        0, 1, 2, 3, 45, 48, 51, 53, 55, 56, 57, 61, 63, 65, 66, 67,
        71, 73, 75, 77, 80, 81, 82, 85, 86, 95, 96, 97, 99,
    ]  # fmt: skip
    assert weather_description(0) == "晴"
    assert weather_description(61) == "小雨"
    assert weather_description(97) == "强雷暴"
    assert weather_description(4) == "未知天气"


def test_an_unknown_weather_code_reads_as_unknown_weather(loopback: LoopbackServer) -> None:
    loopback.route("/v1/search", json_reply({"results": [ZHANJIANG]}))
    loopback.route("/v1/forecast", json_reply(forecast_body(["2026-12-01"], weather_code=[42])))

    (item,) = gather(_adapter(loopback), _plan()).evidence

    assert "天气：未知天气；" in item.snippet
    assert ("weather_code", "42") in [(fact.name, fact.value) for fact in item.facts]
