"""What tests build again and again, built once.

The loopback world itself lives in the public ``external_query_service.testing`` (re-exported
here for the tests that import it from this module). Beside it: the fixed "now" most tests
run at and a service clocked at it, a docs folder, a port nothing listens on, the Zhanjiang
weather world (geocoding and forecast), the port-news page, and the evidence contract's
provider rows and receipts.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.admission import PROTOCOL
from external_query_service.testing import (
    FORECAST,
    FX,
    GEO,
    SEARX,
    RecordedRequest,
    Reply,
    World,
    article,
    hit,
    json_reply,
)

__all__ = [
    "CST",
    "FORECAST",
    "FX",
    "GEO",
    "NOW",
    "ORIGINAL_SOURCE",
    "PORT_QUESTION",
    "SEARX",
    "ZHANJIANG",
    "World",
    "article",
    "closed_port",
    "docs_folder",
    "forecast_body",
    "forecast_reply",
    "hit",
    "make_service",
    "provider_receipt",
    "provider_row",
    "receipt_for",
    "receipt_source",
    "serve_articles",
    "serve_port_news",
    "serve_zhanjiang_geocoding",
]

CST = timezone(timedelta(hours=8))
#: The moment most tests run at: 10:00 in Zhanjiang on 2026-11-30 ("tomorrow" is 2026-12-01).
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=CST)


def make_service(world: World, *adapters: dict[str, Any], **sections: Any) -> ExternalQueryService:
    """A service over ``world`` with ``adapters`` (and settings ``sections``), clocked at
    ``NOW``."""
    return ExternalQueryService(world.settings(*adapters, **sections), clock=fixed_clock(NOW))


def serve_articles(
    world: World,
    question: str,
    texts: tuple[str, ...],
    *,
    site: str,
    title: str,
    published: str,
    listed: tuple[str, str],
) -> list[str]:
    """One article page a passage (``<site><n>.test``, titled ``<title> <n>``), listed in this
    order by the search engine for ``question``, each hit titled and described by ``listed``;
    the pages' URLs."""
    urls = [
        world.page(
            f"{site}{n}.test",
            "/a",
            article(f"{title} {n}", [text], published=published, site_name=f"{title} {n}"),
        )
        for n, text in enumerate(texts)
    ]
    world.results(question, [hit(url, *listed) for url in urls])
    return urls


def docs_folder(parent: Path, files: Mapping[str, str]) -> Path:
    """``parent/docs`` holding ``files`` (name → text, UTF-8)."""
    root = parent / "docs"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def closed_port() -> int:
    """A loopback port nothing listens on (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- the Zhanjiang weather world ------------------------------------------------------------

#: Zhanjiang as the geocoding API answers it.
ZHANJIANG: dict[str, Any] = {
    "id": 1790437,
    "name": "湛江市",
    "latitude": 21.28,
    "longitude": 110.34,
    "country_code": "CN",
    "timezone": "Asia/Shanghai",
    "country": "中国",
    "admin1": "广东省",
}


def serve_zhanjiang_geocoding(world: World) -> None:
    """The world's geocoding API finds Zhanjiang, and only it, for any name."""
    world.geocoding(lambda _r: json_reply({"results": [ZHANJIANG], "generationtime_ms": 0.4}))


def forecast_body(days: list[str], **columns: list[Any]) -> dict[str, Any]:
    """An Open-Meteo daily forecast for ``days`` (cloudy, 18-24.1 °C, dry); ``columns``
    replace whole daily columns."""
    daily: dict[str, Any] = {
        "time": days,
        "weather_code": [3] * len(days),
        "temperature_2m_max": [24.1] * len(days),
        "temperature_2m_min": [18.0] * len(days),
        "precipitation_sum": [0.0] * len(days),
        "precipitation_probability_max": [10] * len(days),
    }
    daily.update(columns)
    return {
        "latitude": 21.25,
        "longitude": 110.375,
        "generationtime_ms": 0.41,
        "utc_offset_seconds": 28800,
        "timezone": "Asia/Shanghai",
        "timezone_abbreviation": "GMT+8",
        "elevation": 20.0,
        "daily_units": {
            "time": "iso8601",
            "weather_code": "wmo code",
            "temperature_2m_max": "°C",
            "temperature_2m_min": "°C",
            "precipitation_sum": "mm",
            "precipitation_probability_max": "%",
        },
        "daily": daily,
    }


def forecast_reply(request: RecordedRequest) -> Reply:
    """The forecast for every day from the request's ``start_date`` to its ``end_date``."""
    start = date.fromisoformat(request.query["start_date"][0])
    end = date.fromisoformat(request.query["end_date"][0])
    days = [(start + timedelta(days=n)).isoformat() for n in range((end - start).days + 1)]
    return json_reply(forecast_body(days))


# -- the port-news page ---------------------------------------------------------------------

PORT_QUESTION = "湛江港今年货物吞吐量是多少？"


def serve_port_news(world: World, question: str = PORT_QUESTION) -> str:
    """A news page on the port's throughput, the one search result for ``question``; its
    URL."""
    url = world.page(
        "port-news.test",
        "/throughput",
        article(
            "湛江港吞吐量创新高",
            [
                "湛江港今年货物吞吐量预计突破3亿吨，同比增长约百分之八，集装箱航线持续加密。",
                "港口集团表示，新建的30万吨级航道将在明年投入使用，进一步提升吞吐能力。",
                "业内人士认为，西部陆海新通道的建设带动了湛江港腹地货源的增长。",
            ],
            published="2026-11-20",
        ),
    )
    world.results(question, [hit(url, "湛江港吞吐量", "湛江港货物吞吐量")])
    return url


# -- the evidence contract ------------------------------------------------------------------


def provider_row(provider_id: str = "connector:docs", **overrides: Any) -> dict[str, Any]:
    """An inventory row of a declared, installed, enabled and ready connector."""
    values: dict[str, Any] = {
        "provider_id": provider_id,
        "provider_kind": "connector",
        "protocol": PROTOCOL,
        "declared": True,
        "installed": True,
        "enabled": True,
        "ready": True,
    }
    values.update(overrides)
    return values


ORIGINAL_SOURCE = "https://example.com/original"


def receipt_source(ref: str = ORIGINAL_SOURCE, **overrides: Any) -> dict[str, Any]:
    """One observed original-publisher source of a receipt."""
    values: dict[str, Any] = {
        "source_ref": ref,
        "source_family": "original-publisher",
        "basis": "observed",
        "finding": "The bounded observation that answers the request",
        "limitation": "Linked pages were not inspected",
        "publication_date": None,
        "accessed_at": "2026-03-01T10:00:00+00:00",
        "content_digest": "sha256:" + "ab" * 32,
    }
    values.update(overrides)
    return values


def receipt_for(
    plan: dict[str, Any], sources: list[dict[str, Any]], **overrides: Any
) -> dict[str, Any]:
    """What the provider ``plan`` selected hands back: a succeeded receipt of ``sources``."""
    values: dict[str, Any] = {
        "schema_version": "external_evidence_receipt_v0",
        "plan_id": plan["plan_id"],
        "request_id": plan["request"]["request_id"],
        "provider_id": plan["selected_provider"]["provider_id"],
        "provider_kind": plan["selected_provider"]["provider_kind"],
        "status": "succeeded",
        "sources": sources,
        "summary": "Compact evidence summary",
        "limitations": ["Caller receipt is not provider execution attestation"],
        "completed_at": "2026-03-01T10:05:00+00:00",
    }
    values.update(overrides)
    return values


def provider_receipt(plan: dict[str, Any], refs: list[str]) -> dict[str, Any]:
    """What the provider a plan selected hands back: a succeeded receipt, one source per ref."""
    sources = [
        receipt_source(
            ref,
            finding=f"The bounded observation at {ref}",
            limitation="What was not inspected",
            accessed_at="2026-03-01T10:00:00Z",
        )
        for ref in refs
    ]
    return receipt_for(plan, sources, completed_at="2026-03-01T10:05:00Z")


#: A recent-news question's semantics: 湛江 over the week before ``NOW``.
RECENT = {
    "location": "湛江",
    "query_kind": "news",
    "time_range": {"start": "2026-11-23", "end": "2026-11-30"},
}


def stale_world(world: World) -> str:
    """A search whose only page about 湛江 and a typhoon was written over a year before
    ``NOW``; returns the question it answers."""
    question = "湛江最近有台风吗？"
    stale = world.page(
        "stale-d.test",
        "/typhoon",
        article(
            "台风过境湛江",
            ["2025年9月5日，台风在湛江市沿海登陆，湛江市全市停课停工，多趟航班取消。"],
            published="2025-09-05",
        ),
    )
    world.results(question, [hit(stale, "台风过境湛江", "台风")])
    return question
