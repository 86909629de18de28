"""Open-Meteo: geocode the plan's location, then read the daily forecast for its dates.

The adapter reports; it never judges. Every geocoding candidate goes out as a
``place_candidates`` finding (the verifier decides whether several are equally plausible),
and a plan without a location yields a ``missing_slot`` finding without any request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, JsonValue

from ..errors import FetchError, UpstreamStatus
from ..models import (
    Evidence,
    ExternalQueryPlan,
    Fact,
    Finding,
    PlaceCandidate,
    ProviderType,
    Readiness,
)
from ._base import Adapter, AdapterOutcome, FactLine, decimal_text, fact_evidence
from ._weather_codes import UNKNOWN_WEATHER, weather_description
from .options import Endpoints

if TYPE_CHECKING:
    from ..net._fetch import ApiResponse

__all__ = [
    "FORECAST_DAYS",
    "PAST_DAYS",
    "UNKNOWN",
    "OpenMeteoAdapter",
]

#: How far back (``past_days``) and ahead (``forecast_days``) the forecast API reaches.
PAST_DAYS = 92
FORECAST_DAYS = 15

UNKNOWN = "未知"

#: Daily variables requested, in the order they appear in the snippet and the facts.
_DAILY = (
    "weather_code",
    "temperature_2m_max",
    "temperature_2m_min",
    "precipitation_sum",
    "precipitation_probability_max",
)
#: Open-Meteo's default units, used when a reply omits ``daily_units``.
_DEFAULT_UNITS = {
    "weather_code": "wmo code",
    "temperature_2m_max": "°C",
    "temperature_2m_min": "°C",
    "precipitation_sum": "mm",
    "precipitation_probability_max": "%",
}
_FACT_NAMES = {
    "temperature_2m_max": "temperature_max",
    "temperature_2m_min": "temperature_min",
    "precipitation_sum": "precipitation_sum",
    "precipitation_probability_max": "precipitation_probability_max",
}


def _text(value: JsonValue) -> str:
    return value.strip() if isinstance(value, str) else ""


def _with_unit(value: str | None, unit: str) -> str:
    if value is None:
        return UNKNOWN
    if not unit:
        return value
    # Percent sits against the number; other units are spaced (24.1 °C, 0.0 mm).
    return f"{value}{unit}" if unit == "%" else f"{value} {unit}"


@dataclass(frozen=True)
class _Place:
    candidate: PlaceCandidate

    @property
    def display(self) -> str:
        """``湛江市（广东省，中国）``: the name, then the areas that differ from it."""
        name = self.candidate.name
        areas = [a for a in (self.candidate.admin1, self.candidate.country) if a and a != name]
        return f"{name}（{'，'.join(dict.fromkeys(areas))}）" if areas else name


def _place(entry: JsonValue) -> _Place | None:
    if not isinstance(entry, dict):
        return None
    name = _text(entry.get("name"))
    latitude = decimal_text(entry.get("latitude"))
    longitude = decimal_text(entry.get("longitude"))
    if not name or latitude is None or longitude is None:
        return None
    candidate = PlaceCandidate(
        name=name,
        admin1=_text(entry.get("admin1")),
        country=_text(entry.get("country")),
        country_code=_text(entry.get("country_code")),
        latitude=latitude,
        longitude=longitude,
        timezone=_text(entry.get("timezone")),
        population=_population(entry.get("population")),
    )
    return _Place(candidate)


def _population(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _iso_date(value: JsonValue) -> date | None:
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def _local_today(now: datetime, timezone: str) -> date:
    """Today at the place; the clock's own offset when the zone is missing or unknown."""
    if timezone:
        try:
            return now.astimezone(ZoneInfo(timezone)).date()
        except (ZoneInfoNotFoundError, ValueError, OSError):
            # ZoneInfo raises OSError for a key naming a folder (``America``).
            pass
    return now.date()


def _geocoding_language(language: str) -> str:
    """The primary subtag, lower-case: the geocoder reads ``zh`` and treats ``zh-CN`` as
    unknown (which silently means English)."""
    primary = language.replace("_", "-").split("-")[0].strip().lower()
    return primary or "zh"


def _failed(exc: FetchError) -> AdapterOutcome:
    if isinstance(exc, UpstreamStatus):
        return AdapterOutcome(status="failed", reason=f"upstream_status_{exc.status}")
    return AdapterOutcome(status="failed", reason=exc.reason)


class OpenMeteoAdapter(Adapter):
    """Weather facts from Open-Meteo: one evidence per local day of the plan's range."""

    kind: ClassVar[str] = "open_meteo"
    provider_type: ClassVar[ProviderType] = "fact_api"
    supported_query_kinds: ClassVar[tuple[str, ...]] = ("weather",)
    supports_freshness: ClassVar[bool] = True
    supports_page_fetch: ClassVar[bool] = False

    class Options(Adapter.Options):
        #: The forecast API and the geocoding API (Open-Meteo's public ones by default).
        base_url: str = Field(default="https://api.open-meteo.com/v1", min_length=1)
        geocoding_url: str = Field(default="https://geocoding-api.open-meteo.com/v1", min_length=1)

        def endpoints(self) -> Endpoints:
            return Endpoints({"base_url": self.base_url, "geocoding_url": self.geocoding_url})

    options: Options

    @property
    def base_url(self) -> str:
        """The forecast API base URL (the public one when not set), without a trailing
        slash."""
        return self.options.base_url.rstrip("/")

    @property
    def geocoding_url(self) -> str:
        """The geocoding API base URL (the public one when not set), without a trailing
        slash."""
        return self.options.geocoding_url.rstrip("/")

    async def _get(
        self, base_url: str, path: str, params: Mapping[str, str | int]
    ) -> ApiResponse | AdapterOutcome:
        try:
            return await self.runtime.endpoint(base_url).get_json(path, params)
        except FetchError as exc:
            return _failed(exc)

    async def probe(self) -> Readiness:
        """One tiny geocoding search and a one-day forecast: both origins must answer."""
        static = self.readiness()
        if not static.ready:
            return static
        checks: Sequence[tuple[str, str, Mapping[str, str | int]]] = (
            (self.geocoding_url, "search", {"name": "Berlin", "count": 1, "format": "json"}),
            (
                self.base_url,
                "forecast",
                {
                    "latitude": "52.52",
                    "longitude": "13.41",
                    "daily": "weather_code",
                    "forecast_days": 1,
                    "timezone": "auto",
                },
            ),
        )
        for base_url, path, params in checks:
            reply = await self._get(base_url, path, params)
            if isinstance(reply, AdapterOutcome):
                return Readiness(ready=False, reason=reply.reason)
            if not isinstance(reply.data, dict):
                return Readiness(ready=False, reason="malformed_response")
        return Readiness(ready=True)

    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        if not plan.location:
            return AdapterOutcome(
                status="empty",
                reason="missing_location",
                findings=(
                    Finding(adapter_id=self.adapter_id, kind="missing_slot", slot="location"),
                ),
            )
        geocoded = await self._geocode(plan.location, _geocoding_language(plan.language))
        if isinstance(geocoded, AdapterOutcome):
            return geocoded
        places = geocoded
        finding = Finding(
            adapter_id=self.adapter_id,
            kind="place_candidates",
            slot="location",
            candidates=tuple(place.candidate for place in places),
        )
        place = places[0]
        now = self.runtime.clock()
        today = _local_today(now, place.candidate.timezone)
        start, end = (
            (plan.time_range.start, plan.time_range.end) if plan.time_range else (today, today)
        )
        if start < today - timedelta(days=PAST_DAYS) or end > today + timedelta(days=FORECAST_DAYS):
            return AdapterOutcome(
                status="empty",
                reason="outside_forecast_window",
                findings=(finding,),
                detail={
                    "today": today.isoformat(),
                    "start": start.isoformat(),
                    "end": end.isoformat(),
                },
            )
        params: dict[str, str | int] = {
            "latitude": place.candidate.latitude,
            "longitude": place.candidate.longitude,
            "daily": ",".join(_DAILY),
            "timezone": "auto",
            "start_date": start.isoformat(),
            "end_date": end.isoformat(),
        }
        reply = await self._get(self.base_url, "forecast", params)
        if isinstance(reply, AdapterOutcome):
            return AdapterOutcome(status=reply.status, reason=reply.reason, findings=(finding,))
        evidence = self._evidence(plan, place, reply, url=reply.url, today=today, now=now)
        if isinstance(evidence, AdapterOutcome):
            return AdapterOutcome(
                status=evidence.status, reason=evidence.reason, findings=(finding,)
            )
        return AdapterOutcome(
            status="ok" if evidence else "empty",
            reason=None if evidence else "no_data",
            evidence=evidence,
            findings=(finding,),
            results=len(evidence),
        )

    async def _geocode(self, location: str, language: str) -> list[_Place] | AdapterOutcome:
        reply = await self._get(
            self.geocoding_url,
            "search",
            {"name": location, "count": 10, "language": language, "format": "json"},
        )
        if isinstance(reply, AdapterOutcome):
            return reply
        if not isinstance(reply.data, dict):
            return AdapterOutcome(status="failed", reason="malformed_response")
        # No match is a 200 without any ``results`` key (protobuf-to-JSON drops empty lists).
        results = reply.data.get("results", [])
        if not isinstance(results, list):
            return AdapterOutcome(status="failed", reason="malformed_response")
        if not results:
            return AdapterOutcome(status="empty", reason="location_not_found")
        places = [place for place in map(_place, results) if place is not None]
        if not places:
            return AdapterOutcome(status="failed", reason="malformed_response")
        return places

    def _evidence(
        self,
        plan: ExternalQueryPlan,
        place: _Place,
        reply: ApiResponse,
        *,
        url: str,
        today: date,
        now: datetime,
    ) -> tuple[Evidence, ...] | AdapterOutcome:
        data = reply.data
        daily = data.get("daily") if isinstance(data, dict) else None
        times = daily.get("time") if isinstance(daily, dict) else None
        if not isinstance(daily, dict) or not isinstance(times, list):
            return AdapterOutcome(status="failed", reason="malformed_response")
        raw_units = data.get("daily_units") if isinstance(data, dict) else None
        units = raw_units if isinstance(raw_units, dict) else {}

        def unit(key: str) -> str:
            given = units.get(key)
            return given if isinstance(given, str) else _DEFAULT_UNITS[key]

        def value(key: str, index: int) -> JsonValue:
            # Daily arrays run parallel to ``time``; a missing column or cell reads as null.
            column = daily.get(key)
            return column[index] if isinstance(column, list) and index < len(column) else None

        rows: list[FactLine] = []
        for index, raw_day in enumerate(times):
            day = _iso_date(raw_day)
            if day is None:
                return AdapterOutcome(status="failed", reason="malformed_response")
            facts: list[Fact] = []
            code = decimal_text(value("weather_code", index))
            weather = UNKNOWN
            if code is not None:
                weather = weather_description(int(code)) if code.isdigit() else UNKNOWN_WEATHER
                facts.append(Fact(name="weather_code", value=code, unit=unit("weather_code")))
                facts.append(Fact(name="weather", value=weather))
            measured: dict[str, str] = {}
            for key, name in _FACT_NAMES.items():
                text = decimal_text(value(key, index))
                if text is not None:
                    facts.append(Fact(name=name, value=text, unit=unit(key)))
                measured[key] = _with_unit(text, unit(key))
            snippet = (
                f"{place.display}{day.isoformat()} 天气：{weather}；"
                f"最高 {measured['temperature_2m_max']}，最低 {measured['temperature_2m_min']}；"
                f"降水 {measured['precipitation_sum']}；"
                f"降水概率 {measured['precipitation_probability_max']}"
            )
            rows.append(FactLine(snippet, about=day, published=today, facts=tuple(facts)))
        if not rows:
            return ()

        return fact_evidence(
            self,
            rows,
            url=url,
            raw_digest=reply.raw_digest,
            accessed_at=reply.fetched_at,
            title=f"Open-Meteo 天气预报：{place.candidate.name}",
            gathered_for=plan.location,
            aliases=(place.candidate.name,),
            metadata={"kind": self.kind, "place": place.display},
        )
