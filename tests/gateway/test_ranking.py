"""Ranking is a pure function of plan + capabilities + readiness."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from external_query_service.gateway._ranking import rank_adapters
from external_query_service.models import AdapterCapability, ExternalQueryPlan, Readiness

READY = Readiness(ready=True)


def plan(kind: str, *, fresh: bool = False) -> ExternalQueryPlan:
    return ExternalQueryPlan(
        question="q", query_kind=kind, search_queries=("q",), freshness_required=fresh
    )


def cap(
    adapter_id: str, provider_type: str, kinds: tuple[str, ...] = (), **flags: bool
) -> AdapterCapability:
    return AdapterCapability(
        adapter_id=adapter_id,
        kind=adapter_id,
        provider_type=provider_type,  # type: ignore[arg-type]
        supported_query_kinds=kinds,
        **flags,
    )


SEARCH = cap("search", "live_search", supports_page_fetch=True, supports_freshness=True)
WEATHER = cap("weather", "fact_api", ("weather",), supports_freshness=True)
FX = cap("fx", "fact_api", ("exchange_rate",))
DOCS = cap("docs", "doc_search", ("documentation",))
ALL = (DOCS, SEARCH, WEATHER, FX)


def order(ranking) -> list[str]:  # type: ignore[no-untyped-def]
    return [item.adapter_id for item in ranking if item.rank is not None]


def ready(*caps: AdapterCapability) -> dict[str, Readiness]:
    return {c.adapter_id: READY for c in caps}


def test_weather_goes_to_the_fact_api_first_then_live_search() -> None:
    assert order(rank_adapters(plan("weather"), ALL, ready(*ALL))) == ["weather", "search"]


def test_weather_without_a_fact_api_goes_to_live_search_and_never_docs() -> None:
    caps = (DOCS, SEARCH, FX)
    ranking = rank_adapters(plan("weather"), caps, ready(*caps))
    assert order(ranking) == ["search"]
    docs = next(item for item in ranking if item.adapter_id == "docs")
    assert docs.rank is None
    assert "documentation" in docs.reason


def test_documentation_goes_to_doc_search_first() -> None:
    assert order(rank_adapters(plan("documentation"), ALL, ready(*ALL))) == ["docs", "search"]


def test_news_never_uses_a_fact_api_that_does_not_declare_it() -> None:
    assert order(rank_adapters(plan("news"), ALL, ready(*ALL))) == ["search"]


def test_unready_adapters_are_left_out_with_their_reason() -> None:
    readiness = {**ready(*ALL), "weather": Readiness(ready=False, reason="disabled")}
    ranking = rank_adapters(plan("weather"), ALL, readiness)
    assert order(ranking) == ["search"]
    weather = next(item for item in ranking if item.adapter_id == "weather")
    assert weather.reason == "not ready: disabled"


def test_ties_break_on_freshness_then_page_fetch_then_id() -> None:
    stale_fetch = cap("a-stale", "live_search", supports_page_fetch=True)
    fresh_nofetch = cap("b-fresh", "live_search", supports_freshness=True)
    fresh_fetch = cap(
        "c-fresh-fetch", "live_search", supports_freshness=True, supports_page_fetch=True
    )
    caps = (stale_fetch, fresh_nofetch, fresh_fetch)
    assert order(rank_adapters(plan("news", fresh=True), caps, ready(*caps))) == [
        "c-fresh-fetch",
        "b-fresh",
        "a-stale",
    ]
    assert order(rank_adapters(plan("news"), caps, ready(*caps))) == [
        "a-stale",
        "c-fresh-fetch",
        "b-fresh",
    ]


@given(st.permutations(ALL), st.sampled_from(["weather", "exchange_rate", "news", "documentation"]))
def test_registration_order_never_changes_the_ranking(
    caps: list[AdapterCapability], kind: str
) -> None:
    assert rank_adapters(plan(kind), caps, ready(*caps)) == rank_adapters(
        plan(kind), ALL, ready(*ALL)
    )


def test_every_adapter_appears_once_in_the_ranking() -> None:
    for kind, fresh in itertools.product(["weather", "news", "documentation"], [True, False]):
        ranking = rank_adapters(plan(kind, fresh=fresh), ALL, ready(*ALL))
        assert sorted(item.adapter_id for item in ranking) == sorted(c.adapter_id for c in ALL)


def test_a_fact_api_declaring_no_kinds_never_goes_before_live_search() -> None:
    catch_all = cap("any-facts", "fact_api")
    caps = (catch_all, SEARCH, WEATHER)
    assert order(rank_adapters(plan("news"), caps, ready(*caps))) == ["search", "any-facts"]
    assert order(rank_adapters(plan("weather"), caps, ready(*caps))) == [
        "weather",
        "search",
        "any-facts",
    ]
    reason = next(
        i.reason
        for i in rank_adapters(plan("news"), caps, ready(*caps))
        if i.adapter_id == "any-facts"
    )
    assert "declares no query kinds" in reason
