"""LangChain drop-ins: ``ExternalQueryRetriever`` and ``ExternalQueryTool`` (``langchain-core``
1.x, the ``[langchain]`` extra; without it, importing this module raises
``IntegrationUnavailable``).

The retriever's documents are the evidence an answer stands on (``common.cited_evidence``):
page content is the snippet, metadata the source fields (``common.evidence_metadata``; its
``score`` is 0..1, ``common.relevance``: documents come in the ranker's order). An
``insufficient_evidence`` or ``clarify`` outcome returns no documents — never a document
made up from the refusal text; every call reports its outcome (status, reason, the
presenter's text) as the callback event ``external_query_outcome`` on the retriever's run,
which callback handlers receive in ``on_custom_event`` and ``astream_events`` lists.

Query semantics for one call come from ``invoke(..., query_semantics=...)``, the run
config's ``configurable["query_semantics"]`` or its ``metadata["query_semantics"]``; they
override the constructor's ``query_semantics`` field by field (keyword over configurable
over metadata).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, PrivateAttr, field_validator

from ..errors import InputError
from ..models import ExternalAnswer, QuerySemantics
from ..service import ExternalQueryService, coerce_semantics
from ..settings import Settings
from ._common import (
    DEFAULT_K,
    OUTCOME_EVENT,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    IntegrationUnavailable,
    ServiceHandle,
    ServiceOwner,
    cited_evidence,
    evidence_metadata,
    merge_semantics,
    outcome,
    parse_tool_arguments,
    positive_k,
    tool_arguments_model,
    tool_text,
)

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        AsyncCallbackManagerForToolRun,
        CallbackManagerForRetrieverRun,
        CallbackManagerForToolRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableConfig, ensure_config
    from langchain_core.tools import BaseTool
except ImportError as exc:  # the optional extra is missing
    raise IntegrationUnavailable("LangChain", "langchain") from exc

__all__ = [
    "SEMANTICS_KEY",
    "ExternalQueryRetriever",
    "ExternalQueryTool",
]

#: The key of per-call semantics in a run config's ``metadata`` or ``configurable``, and the
#: ``invoke`` keyword.
SEMANTICS_KEY = "query_semantics"


def _call_semantics(config: RunnableConfig | None, given: Any) -> QuerySemantics | None:
    """A call's own semantics: the run config's metadata, then its configurable, then the
    ``query_semantics`` keyword, later ones winning field by field."""
    merged = ensure_config(config)
    return merge_semantics(
        (merged.get("metadata") or {}).get(SEMANTICS_KEY),
        (merged.get("configurable") or {}).get(SEMANTICS_KEY),
        given,
    )


class _ServiceModel(ServiceOwner, BaseModel):
    """What both LangChain classes share: ``service=``/``settings=`` and default semantics."""

    #: Defaults for every call; a call's own semantics override them field by field.
    query_semantics: QuerySemantics | None = None

    _handle: ServiceHandle = PrivateAttr()

    def __init__(
        self,
        *,
        service: ExternalQueryService | None = None,
        settings: Settings | None = None,
        **fields: Any,
    ) -> None:
        handle = ServiceHandle(service, settings)
        super().__init__(**fields, **self._fields_for(handle, fields))
        self._handle = handle

    @classmethod
    def _fields_for(cls, handle: ServiceHandle, given: dict[str, Any]) -> dict[str, Any]:
        """Fields built from the service, passed to the framework's constructor."""
        return {}

    @field_validator("query_semantics", mode="before")
    @classmethod
    def _check_semantics(cls, value: object) -> QuerySemantics | None:
        return coerce_semantics(value)  # type: ignore[arg-type]


class ExternalQueryRetriever(_ServiceModel, BaseRetriever):
    """A retriever over ``ExternalQueryService``: at most ``k`` documents, one per piece of
    evidence the answer stands on, best score first; none unless the chain answered.

    ``ExternalQueryRetriever(service=svc)`` shares ``svc``; ``ExternalQueryRetriever(
    settings=Settings(...))`` owns its service (``close()``, ``with``, or collection closes
    it). ``k`` (default 4) may be given per call: ``invoke(question, k=2)``.
    """

    k: int = DEFAULT_K

    @field_validator("k", mode="before")
    @classmethod
    def _check_k(cls, value: object) -> int:
        return positive_k(value)

    def invoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        kwargs[SEMANTICS_KEY] = _call_semantics(config, kwargs.get(SEMANTICS_KEY))
        return super().invoke(input, config, **kwargs)

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        kwargs[SEMANTICS_KEY] = _call_semantics(config, kwargs.get(SEMANTICS_KEY))
        return await super().ainvoke(input, config, **kwargs)

    def _request(
        self, k: int | None, semantics: QuerySemantics | None
    ) -> tuple[int, QuerySemantics | None]:
        size = self.k if k is None else positive_k(k)
        return size, merge_semantics(self.query_semantics, semantics)

    def _documents(self, answer: ExternalAnswer, size: int) -> list[Document]:
        return [
            Document(
                page_content=item.snippet, metadata=evidence_metadata(item), id=item.evidence_id
            )
            for item in cited_evidence(answer)[:size]
        ]

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        query_semantics: QuerySemantics | None = None,
        verbose: bool = False,
    ) -> list[Document]:
        size, semantics = self._request(k, query_semantics)
        answer = self.service.answer(query, semantics)
        documents = self._documents(answer, size)
        run_manager.get_child().on_custom_event(
            OUTCOME_EVENT, outcome(answer, len(documents)), run_id=run_manager.run_id
        )
        return documents

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        query_semantics: QuerySemantics | None = None,
        verbose: bool = False,
    ) -> list[Document]:
        size, semantics = self._request(k, query_semantics)
        answer = await self.service.aanswer(query, semantics)
        documents = self._documents(answer, size)
        await run_manager.get_child().on_custom_event(
            OUTCOME_EVENT, outcome(answer, len(documents)), run_id=run_manager.run_id
        )
        return documents


class ExternalQueryTool(_ServiceModel, BaseTool):
    """A tool that answers a question from external evidence.

    Arguments: ``question`` and every ``QuerySemantics`` field (``query_kind`` limited to the
    service's kinds), all but the question optional. The content is the presenter's text
    (with its numbered sources, or why there is no answer) and a status line; the artifact
    (``response_format="content_and_artifact"``) is the whole ``ExternalAnswer`` as JSON.
    ``service=``/``settings=`` as for the retriever.
    """

    name: str = TOOL_NAME
    description: str = TOOL_DESCRIPTION
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    @classmethod
    def _fields_for(cls, handle: ServiceHandle, given: dict[str, Any]) -> dict[str, Any]:
        if "args_schema" in given:
            raise InputError("ExternalQueryTool builds its own args_schema")
        return {"args_schema": tool_arguments_model(handle.service.query_kinds)}

    def _arguments(
        self, question: str, arguments: dict[str, Any]
    ) -> tuple[str, QuerySemantics | None]:
        model = tool_arguments_model(self.service.query_kinds)
        return parse_tool_arguments(
            model, {"question": question, **arguments}, self.query_semantics
        )

    def _reply(self, answer: ExternalAnswer) -> tuple[str, dict[str, Any]]:
        return tool_text(answer), answer.model_dump(mode="json")

    def _run(
        self,
        question: str,
        run_manager: CallbackManagerForToolRun | None = None,
        **arguments: Any,
    ) -> tuple[str, dict[str, Any]]:
        asked, semantics = self._arguments(question, arguments)
        return self._reply(self.service.answer(asked, semantics))

    async def _arun(
        self,
        question: str,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **arguments: Any,
    ) -> tuple[str, dict[str, Any]]:
        asked, semantics = self._arguments(question, arguments)
        return self._reply(await self.service.aanswer(asked, semantics))
