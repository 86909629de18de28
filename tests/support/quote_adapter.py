"""A third-party adapter the tests register: a stock-quote fact API that lives outside the
package, built on the public adapter interface only."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from external_query_service import Adapter, AdapterOutcome
from external_query_service._digests import sha256_digest
from external_query_service.adapters._base import evidence_id
from external_query_service.models import Evidence, ExternalQueryPlan, Fact, ProviderType


class QuoteAdapter(Adapter):
    """A stock-quote fact API living outside the package."""

    kind: ClassVar[str] = "test_quotes"
    provider_type: ClassVar[ProviderType] = "fact_api"
    supported_query_kinds: ClassVar[tuple[str, ...]] = ("stock_quote",)

    class Options(Adapter.Options):
        base_url: str  # required: a missing key is a settings error

    options: Options

    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        symbol = plan.entities[0]
        response = await self.runtime.endpoint(self.options.base_url).get_json(
            "quote", {"symbol": symbol}
        )
        assert isinstance(response.data, dict)
        price = str(response.data["price"])
        day = str(response.data["date"])
        text = f"{day} {symbol} 收盘价 {price} 元"
        ref = self.runtime.store.put(text, source=response.url)
        digest = sha256_digest(text)
        return AdapterOutcome(
            status="ok",
            results=1,
            evidence=(
                Evidence(
                    evidence_id=evidence_id(response.url, digest, 0),
                    adapter_id=self.adapter_id,
                    provider_type="fact_api",
                    basis="fact_api",
                    url=response.url,
                    title=f"行情：{symbol}",
                    site="quotes.test",
                    snippet=text,
                    score=10_000,
                    published_at=datetime.fromisoformat(day).date(),
                    about_dates=(datetime.fromisoformat(day).date(),),
                    accessed_at=self.runtime.clock().astimezone(UTC),
                    content_digest=digest,
                    raw_digest=response.raw_digest,
                    ref=ref,
                    length=len(text),
                    aliases=(symbol,),
                    facts=(Fact(name="close", value=price, unit="CNY"),),
                ),
            ),
        )
