"""The LlamaIndex retriever and tool on the loopback news world and the docs world."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.schema import MetadataMode, NodeWithScore
from pydantic import Field

from external_query_service import ExternalQueryService, InputError, InvalidQuery, ServiceClosed
from external_query_service.integrations._common import cited_evidence, evidence_metadata
from external_query_service.integrations.llamaindex import (
    ExternalQueryOutcome,
    ExternalQueryRetriever,
    dispatcher,
    external_query_tool,
)
from external_query_service.models import ExternalAnswer
from external_query_service.testing import World

from .support import (
    DOCS_QUESTION,
    DOCS_SEMANTICS,
    NEWS_QUESTION,
    docs_settings,
    news_service,
    serve_news,
)


def portal_threads() -> int:
    return sum(thread.name == "external-query-portal" for thread in threading.enumerate())


class Outcomes(BaseEventHandler):
    """Collects the retriever's outcome events."""

    seen: list[ExternalQueryOutcome] = Field(default_factory=list)

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, ExternalQueryOutcome):
            self.seen.append(event)


@pytest.fixture
def outcomes() -> Iterator[Outcomes]:
    handler = Outcomes()
    dispatcher.add_event_handler(handler)
    yield handler
    dispatcher.event_handlers = [h for h in dispatcher.event_handlers if h is not handler]


# -- the retriever ------------------------------------------------------------------------------


def test_nodes_are_the_admitted_evidence_scored_from_zero_to_one(
    news: ExternalQueryService, world: World, outcomes: Outcomes
) -> None:
    urls = serve_news(world)
    nodes = ExternalQueryRetriever(service=news, k=10).retrieve(NEWS_QUESTION)

    assert all(isinstance(node, NodeWithScore) for node in nodes)
    assert sorted(node.node.metadata["url"] for node in nodes) == sorted(urls)
    for node in nodes:
        assert node.score == node.node.metadata["score"]  # the same 0..1 relevance
        assert 0 < node.score <= 1
    scores = [node.score for node in nodes]
    assert scores == sorted(scores, reverse=True)
    (seen,) = outcomes.seen
    assert (seen.status, seen.returned) == ("answered", 4)


def test_node_metadata_matches_the_evidence_and_the_llm_sees_only_source_fields(
    news: ExternalQueryService,
) -> None:
    answer = news.answer(NEWS_QUESTION)
    best = cited_evidence(answer)[0]
    (node,) = ExternalQueryRetriever(service=news, k=1).retrieve(NEWS_QUESTION)

    assert node.node.node_id == best.evidence_id
    assert node.node.metadata == evidence_metadata(best)
    assert node.node.get_content() == best.snippet
    shown = node.node.get_content(metadata_mode=MetadataMode.LLM)
    assert f"url: {best.url}" in shown
    assert "site: news-a.test" in shown
    assert "content_digest" not in shown
    assert "evidence_id" not in shown


def test_async_retrieval_returns_the_same_evidence(news: ExternalQueryService) -> None:
    retriever = ExternalQueryRetriever(service=news, k=3)
    synchronous = [node.node.node_id for node in retriever.retrieve(NEWS_QUESTION)]
    asynchronous = asyncio.run(retriever.aretrieve(NEWS_QUESTION))

    assert [node.node.node_id for node in asynchronous] == synchronous
    assert len(synchronous) == 3


def test_insufficient_evidence_yields_no_nodes_and_an_outcome_event(
    world: World, outcomes: Outcomes
) -> None:
    with news_service(world, verifier={"min_sources_summary": 5}) as service:
        retriever = ExternalQueryRetriever(service=service)
        nodes = retriever.retrieve(NEWS_QUESTION)
        async_nodes = asyncio.run(retriever.aretrieve(NEWS_QUESTION))

    assert nodes == []
    assert async_nodes == []
    assert [(e.status, e.reason, e.returned) for e in outcomes.seen] == [
        ("insufficient_evidence", "insufficient_sources", 0)
    ] * 2
    assert "不足" in outcomes.seen[0].text


def test_a_retriever_with_its_own_settings_closes_its_service() -> None:
    with ExternalQueryRetriever(settings=docs_settings(), k=2, query_semantics=DOCS_SEMANTICS) as r:
        assert len(r.retrieve(DOCS_QUESTION)) == 2
    with pytest.raises(ServiceClosed):
        r.retrieve(DOCS_QUESTION)


def test_an_async_context_closes_an_owned_service() -> None:
    async def main() -> ExternalQueryRetriever:
        async with ExternalQueryRetriever(
            settings=docs_settings(), query_semantics=DOCS_SEMANTICS
        ) as retriever:
            assert len(await retriever.aretrieve(DOCS_QUESTION)) == 3
        return retriever

    retriever = asyncio.run(main())
    with pytest.raises(ServiceClosed):
        retriever.retrieve(DOCS_QUESTION)


@pytest.mark.parametrize("k", [0, False, "3"])
def test_a_bad_k_is_an_input_error(news: ExternalQueryService, k: Any) -> None:
    with pytest.raises(InputError, match="k must be a whole number"):
        ExternalQueryRetriever(service=news, k=k)


# -- the tool ---------------------------------------------------------------------------------


def test_the_tool_answers_with_text_and_the_whole_answer(news: ExternalQueryService) -> None:
    tool = external_query_tool(service=news)
    output = tool.call(question=NEWS_QUESTION, query_kind="news", entities=["珠海航展"])

    answer = output.raw_output
    assert isinstance(answer, ExternalAnswer)
    assert answer.status == "answered"
    assert (answer.plan.query_kind, answer.plan.entities) == ("news", ("珠海航展",))
    assert output.content == f"{answer.text.rstrip()}\n\nstatus: answered"
    assert "news-a.test" in output.content


def test_the_tool_answers_asynchronously(news: ExternalQueryService) -> None:
    tool = external_query_tool(service=news)
    output = asyncio.run(tool.acall(question=NEWS_QUESTION))

    assert output.content.endswith("status: answered")
    assert output.raw_output.status == "answered"


def test_the_tools_schema_is_the_question_and_the_semantics_fields() -> None:
    with ExternalQueryService(docs_settings()) as service:
        tool = external_query_tool(service=service, name="ask_sources")
        parameters = tool.metadata.get_parameters_dict()

        assert tool.metadata.name == "ask_sources"
        assert parameters["required"] == ["question"]
        assert parameters["properties"]["query_kind"]["anyOf"][0]["enum"] == list(
            service.query_kinds
        )


def test_the_tool_checks_the_arguments_an_agent_passes(news: ExternalQueryService) -> None:
    tool = external_query_tool(service=news)
    with pytest.raises(InvalidQuery, match="mood: unknown key"):
        tool.call(question=NEWS_QUESTION, mood="curious")
    with pytest.raises(InvalidQuery, match="question: Field required"):
        asyncio.run(tool.acall(query_kind="news"))


def test_the_tools_defaults_sit_under_each_calls_arguments() -> None:
    tool = external_query_tool(settings=docs_settings(), query_semantics=DOCS_SEMANTICS)
    assert tool.call(question=DOCS_QUESTION).content.endswith("status: answered")
    overridden = tool.call(question=DOCS_QUESTION, query_kind="news").content
    assert overridden.endswith("status: insufficient_evidence (no_ready_provider)")


def test_a_tool_with_its_own_settings_closes_its_service_when_collected() -> None:
    before = portal_threads()
    tool = external_query_tool(settings=docs_settings(), query_semantics=DOCS_SEMANTICS)
    assert tool.call(question=DOCS_QUESTION).raw_output.status == "answered"
    assert portal_threads() == before + 1  # the owned service's private loop
    del tool
    gc.collect()
    assert portal_threads() == before
