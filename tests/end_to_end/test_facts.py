"""Fact APIs through the whole chain: clarify on ambiguous or missing places, FX rates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.storage import SQLiteLedger as Ledger
from external_query_service.testing import (
    FORECAST,
    FX,
    RecordedRequest,
    Reply,
    World,
    json_reply,
)
from tests.support.world import NOW, forecast_reply


def place(name: str, admin1: str, lat: float, lon: float) -> dict[str, Any]:
    return {
        "id": abs(hash((name, admin1))) % 10_000_000,
        "name": name,
        "latitude": lat,
        "longitude": lon,
        "country_code": "CN",
        "timezone": "Asia/Shanghai",
        "country": "中国",
        "admin1": admin1,
    }


def service(world: World, *adapters: dict[str, Any]) -> ExternalQueryService:
    return ExternalQueryService(world.settings(*adapters), clock=fixed_clock(NOW))


def test_two_places_with_the_same_name_ask_which_one(world: World) -> None:
    places = [place("朝阳区", "北京市", 39.92, 116.44), place("朝阳区", "吉林省", 43.83, 125.29)]
    world.geocoding(lambda _r: json_reply({"results": places}))
    world.forecast(forecast_reply)
    with service(world, world.open_meteo()) as svc:
        answer = svc.answer(
            "朝阳区明天天气？",
            {
                "query_kind": "weather",
                "location": "朝阳区",
                "time_range": {"start": "2026-12-01", "end": "2026-12-01"},
            },
        )
    assert answer.status == "clarify"
    assert answer.reason == "ambiguous_target"
    assert len(answer.verifier.clarify_options) == 2
    assert "北京市" in answer.text
    assert "吉林省" in answer.text
    assert answer.sources == ()


def test_weather_without_a_location_asks_for_it_and_makes_no_request(world: World) -> None:
    world.geocoding(lambda _r: json_reply({"results": []}))
    with service(world, world.open_meteo()) as svc:
        answer = svc.answer("明天天气怎么样？", {"query_kind": "weather"})
    assert answer.status == "clarify"
    assert answer.reason == "missing_slot"
    assert answer.verifier.missing_slots == ("location",)
    assert "地点" in answer.text
    assert world.server.requests_to(f"{FORECAST}/forecast") == []


def test_exchange_rate_answers_from_the_fx_api_with_base_first(world: World) -> None:
    world.fx(
        "latest",
        json_reply({"amount": 1.0, "base": "USD", "date": "2026-11-27", "rates": {"CNY": 7.1042}}),
    )
    with service(world, world.frankfurter()) as svc:
        answer = svc.answer(
            "美元兑人民币汇率是多少？", {"query_kind": "exchange_rate", "entities": ["USD", "CNY"]}
        )
    assert answer.status == "answered"
    assert answer.answer_contract == "direct_fact"
    assert "7.1042" in answer.text
    request = world.server.requests_to(f"{FX}/latest")[0]
    assert (request.query["from"], request.query["to"]) == (["USD"], ["CNY"])


def test_weekend_rate_carried_forward_passes_within_max_age(world: World) -> None:
    def dated(request: RecordedRequest) -> Reply:
        return json_reply(
            {"amount": 1.0, "base": "USD", "date": "2026-11-27", "rates": {"CNY": 7.1042}}
        )

    world.server.route(f"{FX}/2026-11-29", dated)
    with service(world, world.frankfurter()) as svc:
        answer = svc.answer(
            "11月29日美元兑人民币汇率？",
            {
                "query_kind": "exchange_rate",
                "entities": ["USD", "CNY"],
                "time_range": {"start": "2026-11-29", "end": "2026-11-29"},
            },
        )
    assert answer.status == "answered"
    time_checks = [c for c in answer.verifier.checks if c.check == "time"]
    assert [c.reason for c in time_checks] == ["carried_forward"]
    assert any("2026-11-27" in note for note in answer.uncertainties)


def test_a_configured_ledger_persists_every_plan_receipt_and_admission_once(
    world: World, tmp_path: Path
) -> None:
    world.fx(
        "latest",
        json_reply({"amount": 1.0, "base": "USD", "date": "2026-11-27", "rates": {"CNY": 7.1042}}),
    )
    ledger_path = tmp_path / "ledger.sqlite3"
    settings = world.settings(world.frankfurter(), ledger={"path": str(ledger_path)})
    semantics = {"query_kind": "exchange_rate", "entities": ["USD", "CNY"]}
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as svc:
        first = svc.answer("美元兑人民币汇率是多少？", semantics)
        second = svc.answer("美元兑人民币汇率是多少？", semantics)

    assert first.admission.persisted
    assert first.admission.retirement_ready
    assert second.admission.plan_ids == first.admission.plan_ids
    with Ledger(ledger_path, create=False) as ledger:
        assert all(ledger.has_record(plan_id) for plan_id in first.admission.plan_ids)
        assert all(ledger.has_record(digest) for digest in first.admission.receipt_digests)
        records = ledger.count()
        assert ledger.verify().ok
    # The same answer again adds nothing: every record is content-addressed.
    assert records == len(first.admission.plan_ids) * 3 + 1
