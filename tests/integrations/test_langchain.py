"""The LangChain retriever and tool on the loopback news world and the docs world."""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any
from uuid import UUID

import pytest

pytest.importorskip("langchain_core")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage
from pydantic import ValidationError

from external_query_service import (
    ExternalQueryService,
    InputError,
    InvalidQuery,
    ServiceClosed,
    fixed_clock,
)
from external_query_service.integrations._common import OUTCOME_EVENT
from external_query_service.integrations.langchain import (
    ExternalQueryRetriever,
    ExternalQueryTool,
)
from external_query_service.models import ExternalAnswer
from external_query_service.testing import World

from .support import (
    DOCS_QUESTION,
    DOCS_SEMANTICS,
    NEWS_QUESTION,
    NOW,
    docs_settings,
    news_service,
    serve_news,
)


class Outcomes(BaseCallbackHandler):
    """Collects the retriever's outcome events."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_custom_event(
        self,
        name: str,
        data: Any,
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if name == OUTCOME_EVENT:
            self.seen.append(data)


def portal_threads() -> int:
    return sum(thread.name == "external-query-portal" for thread in threading.enumerate())


# -- the retriever ------------------------------------------------------------------------------


def test_documents_are_the_admitted_evidence_with_its_source_metadata(
    news: ExternalQueryService, world: World
) -> None:
    urls = serve_news(world)
    retriever = ExternalQueryRetriever(service=news, k=10)
    documents = retriever.invoke(NEWS_QUESTION)

    assert all(isinstance(document, Document) for document in documents)
    assert sorted(document.metadata["url"] for document in documents) == sorted(urls)
    scores = [document.metadata["score"] for document in documents]
    assert scores == sorted(scores, reverse=True)
    first = documents[0]
    assert first.metadata["site"] == "news-a.test"
    assert first.metadata["title"] == "珠海航展新机型集中亮相"
    assert first.metadata["published_at"] == "2026-11-12"
    assert first.id == first.metadata["evidence_id"]
    assert "新机型" in first.page_content
    assert first.metadata["content_digest"].startswith("sha256:")


def test_k_from_the_constructor_and_per_call_returns_exactly_k(
    news: ExternalQueryService,
) -> None:
    retriever = ExternalQueryRetriever(service=news, k=2)

    assert len(retriever.invoke(NEWS_QUESTION)) == 2
    assert len(retriever.invoke(NEWS_QUESTION, k=3)) == 3
    assert len(retriever.invoke(NEWS_QUESTION, k=1)) == 1
    assert len(ExternalQueryRetriever(service=news).invoke(NEWS_QUESTION)) == 4  # default 4


@pytest.mark.parametrize("k", [0, -2, True, "2"])
def test_a_bad_k_is_an_input_error_in_the_constructor_and_per_call(
    news: ExternalQueryService, k: object
) -> None:
    with pytest.raises(InputError, match="k must be a whole number"):
        ExternalQueryRetriever(service=news, k=k)
    with pytest.raises(InputError, match="k must be a whole number"):
        ExternalQueryRetriever(service=news).invoke(NEWS_QUESTION, k=k)


def test_every_call_reports_its_outcome_to_the_callbacks(news: ExternalQueryService) -> None:
    outcomes = Outcomes()
    documents = ExternalQueryRetriever(service=news, k=3).invoke(
        NEWS_QUESTION, config={"callbacks": [outcomes]}
    )

    (seen,) = outcomes.seen
    assert (seen["status"], seen["reason"], seen["returned"]) == ("answered", None, 3)
    assert len(documents) == 3
    assert "news-a.test" in seen["text"]


def test_insufficient_evidence_returns_no_documents_and_reports_why(world: World) -> None:
    # Four sites are admitted but five are required: admitted evidence, yet no answer.
    outcomes = Outcomes()
    with news_service(world, verifier={"min_sources_summary": 5}) as service:
        documents = ExternalQueryRetriever(service=service).invoke(
            NEWS_QUESTION, config={"callbacks": [outcomes]}
        )

    assert documents == []
    (seen,) = outcomes.seen
    assert (seen["status"], seen["reason"], seen["returned"]) == (
        "insufficient_evidence",
        "insufficient_sources",
        0,
    )
    assert "不足" in seen["text"]


def test_a_question_to_clarify_returns_no_documents_and_reports_what_is_missing(
    world: World,
) -> None:
    outcomes = Outcomes()
    settings = world.settings(world.open_meteo())
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        retriever = ExternalQueryRetriever(
            service=service, query_semantics={"query_kind": "weather"}
        )
        documents = retriever.invoke("明天天气怎么样？", config={"callbacks": [outcomes]})

    assert documents == []
    (seen,) = outcomes.seen
    assert (seen["status"], seen["reason"]) == ("clarify", "missing_slot")
    assert "地点" in seen["text"]


@pytest.mark.parametrize(
    "call",
    [
        {"config": {"configurable": {"query_semantics": DOCS_SEMANTICS}}},
        {"config": {"metadata": {"query_semantics": DOCS_SEMANTICS}}},
        {"query_semantics": DOCS_SEMANTICS},
    ],
    ids=["configurable", "metadata", "keyword"],
)
def test_query_semantics_per_call_come_from_the_run_config_or_a_keyword(
    call: dict[str, Any],
) -> None:
    with ExternalQueryRetriever(settings=docs_settings()) as retriever:
        # Without the documentation kind nobody serves the question.
        assert retriever.invoke(DOCS_QUESTION) == []
        documents = retriever.invoke(DOCS_QUESTION, **call)

    assert len(documents) == 3
    assert {document.metadata["adapter_id"] for document in documents} == {"docs"}


def test_a_keyword_overrides_the_config_which_overrides_the_constructor_field_by_field() -> None:
    with ExternalQueryRetriever(
        settings=docs_settings(), query_semantics={"query_kind": "news", "language": "en"}
    ) as retriever:
        outcomes = Outcomes()
        documents = retriever.invoke(
            DOCS_QUESTION,
            config={
                "configurable": {"query_semantics": {"query_kind": "weather"}},
                "callbacks": [outcomes],
            },
            query_semantics={"query_kind": "documentation"},
        )

    assert len(documents) == 3
    assert outcomes.seen[0]["status"] == "answered"


def test_bad_semantics_per_call_are_an_invalid_query() -> None:
    with ExternalQueryRetriever(settings=docs_settings()) as retriever:
        with pytest.raises(InvalidQuery, match="unknown query kind 'poetry'"):
            retriever.invoke(DOCS_QUESTION, query_semantics={"query_kind": "poetry"})
        with pytest.raises(InvalidQuery, match="mood: unknown key"):
            retriever.invoke(
                DOCS_QUESTION, config={"configurable": {"query_semantics": {"mood": 1}}}
            )


def test_async_retrieval_runs_on_the_callers_loop_and_reports_its_outcome(
    world: World,
) -> None:
    outcomes = Outcomes()
    before = portal_threads()
    with news_service(world) as service:
        retriever = ExternalQueryRetriever(service=service, k=3)
        documents = asyncio.run(retriever.ainvoke(NEWS_QUESTION, config={"callbacks": [outcomes]}))
        # The sync path would have started the service's private loop; the async one did not.
        assert portal_threads() == before

    assert len(documents) == 3
    assert outcomes.seen[0]["status"] == "answered"


def test_async_retrieval_takes_k_and_semantics_per_call() -> None:
    async def main() -> list[Document]:
        async with ExternalQueryRetriever(settings=docs_settings()) as retriever:
            return await retriever.ainvoke(DOCS_QUESTION, k=2, query_semantics=DOCS_SEMANTICS)

    assert len(asyncio.run(main())) == 2


def test_a_retriever_closes_the_service_it_owns_but_not_a_shared_one(
    news: ExternalQueryService,
) -> None:
    with ExternalQueryRetriever(settings=docs_settings(), query_semantics=DOCS_SEMANTICS) as owned:
        assert len(owned.invoke(DOCS_QUESTION)) == 3
    with pytest.raises(ServiceClosed):
        owned.invoke(DOCS_QUESTION)

    with ExternalQueryRetriever(service=news) as shared:
        shared.invoke(NEWS_QUESTION)
    assert news.answer(NEWS_QUESTION).status == "answered"


def test_an_owned_service_closes_when_the_retriever_is_collected() -> None:
    retriever = ExternalQueryRetriever(settings=docs_settings(), query_semantics=DOCS_SEMANTICS)
    copy = retriever.model_copy()
    service = retriever.service
    assert len(retriever.invoke(DOCS_QUESTION)) == 3
    del retriever
    gc.collect()
    # A copy shares the service: it stays open while any copy is alive.
    assert len(copy.invoke(DOCS_QUESTION)) == 3
    del copy
    gc.collect()
    with pytest.raises(ServiceClosed):
        service.answer(DOCS_QUESTION, DOCS_SEMANTICS)


# -- the tool ---------------------------------------------------------------------------------


def test_the_tool_answers_with_the_presenters_text_sources_and_status(
    news: ExternalQueryService,
) -> None:
    tool = ExternalQueryTool(service=news)
    message = tool.invoke(
        {
            "type": "tool_call",
            "id": "call-1",
            "name": tool.name,
            "args": {"question": NEWS_QUESTION},
        }
    )

    assert isinstance(message, ToolMessage)
    answer = ExternalAnswer.model_validate(message.artifact)
    assert answer.status == "answered"
    assert message.content == f"{answer.text.rstrip()}\n\nstatus: answered"
    assert "news-a.test" in message.content  # the numbered sources
    assert "来源" in message.content


def test_the_tool_passes_its_typed_semantics_arguments_to_the_plan(
    news: ExternalQueryService,
) -> None:
    tool = ExternalQueryTool(service=news)
    text = tool.invoke(
        {
            "question": NEWS_QUESTION,
            "query_kind": "news",
            "entities": ["珠海航展"],
            "time_range": {"start": "2026-11-01", "end": "2026-11-30"},
            "language": "zh",
        }
    )
    message = tool.invoke(
        {
            "type": "tool_call",
            "id": "call-2",
            "name": tool.name,
            "args": {"question": NEWS_QUESTION, "entities": ["珠海航展"], "query_kind": "news"},
        }
    )

    assert text.endswith("status: answered")
    plan = message.artifact["plan"]
    assert (plan["query_kind"], plan["entities"]) == ("news", ["珠海航展"])


def test_the_tools_schema_is_the_question_and_the_services_kinds() -> None:
    with ExternalQueryTool(settings=docs_settings()) as tool:
        schema = tool.tool_call_schema.model_json_schema()
        kinds = tool.service.query_kinds

    assert schema["required"] == ["question"]
    assert schema["properties"]["query_kind"]["anyOf"][0]["enum"] == list(kinds)
    assert {"location", "compare_targets", "time_range", "language"} <= set(schema["properties"])


def test_the_tool_refuses_arguments_it_does_not_know(news: ExternalQueryService) -> None:
    tool = ExternalQueryTool(service=news)
    with pytest.raises(ValidationError, match="mood"):
        tool.invoke({"question": NEWS_QUESTION, "mood": "curious"})
    with pytest.raises(InvalidQuery, match="the question is empty"):
        tool.invoke({"question": "  "})


def test_the_tools_default_semantics_sit_under_each_calls_arguments() -> None:
    with ExternalQueryTool(settings=docs_settings(), query_semantics=DOCS_SEMANTICS) as tool:
        answered = tool.invoke({"question": DOCS_QUESTION})
        overridden = tool.invoke({"question": DOCS_QUESTION, "query_kind": "news"})

    assert answered.endswith("status: answered")
    assert overridden.endswith("status: insufficient_evidence (no_ready_provider)")


def test_the_tool_answers_asynchronously_on_the_callers_loop(world: World) -> None:
    before = portal_threads()
    with news_service(world) as service:
        tool = ExternalQueryTool(service=service)
        message = asyncio.run(
            tool.ainvoke(
                {
                    "type": "tool_call",
                    "id": "c",
                    "name": tool.name,
                    "args": {"question": NEWS_QUESTION},
                }
            )
        )
        assert portal_threads() == before

    assert message.content.endswith("status: answered")
    assert message.artifact["status"] == "answered"


def test_a_tool_closes_the_service_it_owns() -> None:
    with ExternalQueryTool(settings=docs_settings()) as tool:
        assert tool.invoke({"question": DOCS_QUESTION, **DOCS_SEMANTICS}).endswith("answered")
    with pytest.raises(ServiceClosed):
        tool.invoke({"question": DOCS_QUESTION})


def test_the_outcome_event_shows_in_astream_events(world: World) -> None:
    async def main(service: ExternalQueryService) -> list[dict[str, Any]]:
        retriever = ExternalQueryRetriever(service=service)
        return [event async for event in retriever.astream_events(NEWS_QUESTION, version="v2")]

    with news_service(world, verifier={"min_sources_summary": 5}) as service:
        events = asyncio.run(main(service))

    custom = [event for event in events if event["event"] == "on_custom_event"]
    assert [event["name"] for event in custom] == [OUTCOME_EVENT]
    assert custom[0]["data"]["status"] == "insufficient_evidence"
    assert events[-1]["event"] == "on_retriever_end"
    assert events[-1]["data"]["output"] == []
