"""The search world the page-walk tests share: one question, its engine, the snippet its
hits carry, and the page failures an answer's attempt reports."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from external_query_service.models import ExternalAnswer

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=timezone(timedelta(hours=8)))
QUESTION = "湛江港今年吞吐量是多少？"
SEARX = "https://searx.example.org"
ADAPTER = {"kind": "searxng", "id": "searx", "base_url": SEARX}
SNIPPET = "湛江港今年前十个月货物吞吐量达到2.6亿吨"


def page_failures(answer: ExternalAnswer) -> list[str]:
    """The first attempt's page failures, each ``"<url> <reason>"``."""
    failures: list[str] = answer.audit.named("attempt")[0].detail["page_failures"]
    return failures
