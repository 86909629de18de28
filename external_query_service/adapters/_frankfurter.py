"""Frankfurter v1: the European Central Bank's reference rates for one currency pair.

The pair is the first two distinct entities shaped like an ISO 4217 code (three ASCII
letters) that the provider lists: ``text._currencies.currency_pair``, the rule the verifier's
target check uses too. Dates are reported as the provider returns them: a weekend request
answers with the last working day, and judging that carry-forward is the verifier's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field, JsonValue

from ..errors import FetchError, UpstreamStatus
from ..models import Evidence, ExternalQueryPlan, Fact, Finding, ProviderType, Readiness
from ..text._currencies import currency_pair
from ._base import Adapter, AdapterOutcome, FactLine, decimal_text, fact_evidence
from .options import Endpoints

if TYPE_CHECKING:
    from ..net._fetch import ApiResponse

__all__ = [
    "MAX_SERIES_DATES",
    "FrankfurterAdapter",
    "currency_pair",
]

#: At most this many dates from a time series become evidence (the most recent ones).
MAX_SERIES_DATES = 31


def _amount_text(value: JsonValue) -> str:
    """``1`` rather than ``1.0`` for the amount the rate is quoted for."""
    text = decimal_text(value)
    if text is None:
        return "1"
    number = Decimal(text)
    return str(int(number)) if number == number.to_integral_value() else text


def _iso_date(value: object) -> date | None:
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


class FrankfurterAdapter(Adapter):
    """Exchange-rate facts: one evidence per date the provider returned."""

    kind: ClassVar[str] = "frankfurter"
    provider_type: ClassVar[ProviderType] = "fact_api"
    supported_query_kinds: ClassVar[tuple[str, ...]] = ("exchange_rate",)
    supports_freshness: ClassVar[bool] = True
    supports_page_fetch: ClassVar[bool] = False

    class Options(Adapter.Options):
        #: The Frankfurter API (the public one by default).
        base_url: str = Field(default="https://api.frankfurter.dev/v1", min_length=1)

        def endpoints(self) -> Endpoints:
            return Endpoints({"base_url": self.base_url})

    options: Options
    _currencies: frozenset[str] | None = None

    @property
    def base_url(self) -> str:
        """The configured API base URL (the public one when not set), without a trailing slash."""
        return self.options.base_url.rstrip("/")

    async def _get(
        self, path: str, params: Mapping[str, str | int] | None = None
    ) -> ApiResponse | AdapterOutcome:
        try:
            return await self.runtime.endpoint(self.base_url).get_json(path, params)
        except UpstreamStatus as exc:
            # 404: unknown currency or no data; 422: a request the API refuses (same pair,
            # bad date). Both say "nothing to report", not "the provider is down".
            if exc.status == 404:
                return AdapterOutcome(status="empty", reason="not_found")
            if exc.status == 422:
                return AdapterOutcome(status="empty", reason="bad_request")
            return AdapterOutcome(status="failed", reason=f"upstream_status_{exc.status}")
        except FetchError as exc:
            return AdapterOutcome(status="failed", reason=exc.reason)

    async def probe(self) -> Readiness:
        """``GET /currencies``: a small, fixed answer that proves the API is there."""
        static = self.readiness()
        if not static.ready:
            return static
        reply = await self._get("currencies")
        if isinstance(reply, AdapterOutcome):
            return Readiness(ready=False, reason=reply.reason)
        if not isinstance(reply.data, dict) or not reply.data:
            return Readiness(ready=False, reason="malformed_response")
        return Readiness(ready=True)

    async def _known_currencies(self) -> frozenset[str] | None:
        """The provider's currency codes (``GET /currencies``), fetched once per adapter;
        None when unavailable (the structural rule alone then applies)."""
        if self._currencies is None:
            reply = await self._get("currencies")
            if isinstance(reply, AdapterOutcome) or not isinstance(reply.data, dict):
                return None
            self._currencies = frozenset(code.upper() for code in reply.data)
        return self._currencies

    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        # Shape first (no request when there cannot be a pair), then the provider's list.
        pair = currency_pair(plan.entities)
        if pair is not None:
            pair = currency_pair(plan.entities, await self._known_currencies())
        if pair is None:
            return AdapterOutcome(
                status="empty",
                reason="missing_currency_pair",
                findings=(
                    Finding(adapter_id=self.adapter_id, kind="missing_slot", slot="currency_pair"),
                ),
            )
        base, quote = pair
        if plan.time_range is None:
            path = "latest"
        elif plan.time_range.days == 1:
            path = f"{plan.time_range.start.isoformat()}"
        else:
            path = f"{plan.time_range.start.isoformat()}..{plan.time_range.end.isoformat()}"
        params = {"from": base, "to": quote}
        reply = await self._get(path, params)
        if isinstance(reply, AdapterOutcome):
            return reply
        rates = self._rates(reply.data, quote)
        if rates is None:
            return AdapterOutcome(status="failed", reason="malformed_response")
        omitted = max(0, len(rates) - MAX_SERIES_DATES)
        kept = sorted(rates.items())[omitted:]
        if not kept:
            return AdapterOutcome(status="empty", reason="no_data")
        url = reply.url  # the request as sent, query included
        amount = _amount_text(reply.data.get("amount") if isinstance(reply.data, dict) else None)
        evidence = self._evidence(base, quote, amount, kept, reply=reply, url=url)
        return AdapterOutcome(
            status="ok",
            evidence=evidence,
            results=len(rates),
            detail={"omitted_dates": omitted} if omitted else {},
        )

    @staticmethod
    def _rates(data: JsonValue, quote: str) -> dict[date, str] | None:
        """``{date: rate}`` from a single-day or a time-series reply; None when malformed."""
        if not isinstance(data, dict):
            return None
        raw = data.get("rates")
        if not isinstance(raw, dict):
            return None
        if "date" in data:
            day = _iso_date(data.get("date"))
            rate = decimal_text(raw.get(quote))
            if day is None:
                return None
            return {} if rate is None else {day: rate}
        rates: dict[date, str] = {}
        for key, row in raw.items():
            day = _iso_date(key)
            if day is None or not isinstance(row, dict):
                return None
            rate = decimal_text(row.get(quote))
            if rate is not None:
                rates[day] = rate
        return rates

    def _evidence(
        self,
        base: str,
        quote: str,
        amount: str,
        rates: list[tuple[date, str]],
        *,
        reply: ApiResponse,
        url: str,
    ) -> tuple[Evidence, ...]:
        pair = f"{base}/{quote}"
        lines = [
            FactLine(
                snippet=f"{day.isoformat()} 欧洲央行参考汇率：{amount} {base} = {rate} {quote}",
                about=day,
                published=day,
                facts=(
                    Fact(name="rate", value=rate, unit=f"{quote} per {amount} {base}"),
                    Fact(name="amount", value=amount, unit=base),
                ),
            )
            for day, rate in rates
        ]
        return fact_evidence(
            self,
            lines,
            url=url,
            raw_digest=reply.raw_digest,
            accessed_at=reply.fetched_at,
            title=f"Frankfurter 欧洲央行参考汇率：{pair}",
            gathered_for=pair,
            aliases=(base, quote, pair),
            metadata={"kind": self.kind, "pair": pair},
        )
