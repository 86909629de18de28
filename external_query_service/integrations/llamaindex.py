"""LlamaIndex drop-ins: ``ExternalQueryRetriever`` and ``external_query_tool()``
(``llama-index-core`` 0.14, the ``[llamaindex]`` extra; without it, importing this module
raises ``IntegrationUnavailable``).

The retriever returns one ``NodeWithScore`` per piece of evidence the answer stands on
(``common.cited_evidence``): a ``TextNode`` whose id is the evidence id, text the snippet and
metadata the source fields (``common.evidence_metadata``; an LLM sees only url, site, title
and published_at of them), scored 0–1 by ``common.relevance`` (for page evidence the ranker's
calibrated probability that the passage answers, so nodes come in the ranker's order).
``insufficient_evidence`` and ``clarify`` return no nodes; every call dispatches an
``ExternalQueryOutcome`` instrumentation event (status, reason, the presenter's text) that
event handlers on this module's dispatcher, or the root one, receive.
"""

from __future__ import annotations

from typing import Any

from .._questions import SemanticsInput, coerce_semantics
from ..models import Evidence, ExternalAnswer, QuerySemantics
from ..service import ExternalQueryService
from ..settings import Settings
from ._common import (
    DEFAULT_K,
    SCORE_SCALE,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    IntegrationUnavailable,
    ServiceHandle,
    ServiceOwner,
    cited_evidence,
    evidence_metadata,
    outcome,
    parse_tool_arguments,
    positive_k,
    relevance,
    tool_arguments_model,
    tool_text,
)

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.events.base import BaseEvent
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.core.tools import FunctionTool
except ImportError as exc:  # the optional extra is missing
    raise IntegrationUnavailable("LlamaIndex", "llamaindex") from exc

__all__ = [
    "HIDDEN_METADATA",
    "SCORE_SCALE",
    "ExternalQueryOutcome",
    "ExternalQueryRetriever",
    "external_query_tool",
]

#: Metadata an LLM does not need in a node's text (and an embedding should not see).
HIDDEN_METADATA = ["accessed_at", "evidence_id", "content_digest", "adapter_id", "basis", "score"]

dispatcher = get_dispatcher(__name__)


class ExternalQueryOutcome(BaseEvent):
    """What one retrieval decided (``common.outcome``): status, reason, text and more."""

    status: str
    reason: str | None
    text: str
    answer_contract: str
    request_id: str
    returned: int
    missing_targets: list[str]
    clarify_options: list[str]

    @classmethod
    def class_name(cls) -> str:
        return "ExternalQueryOutcome"


def _node(item: Evidence) -> NodeWithScore:
    node = TextNode(
        id_=item.evidence_id,
        text=item.snippet,
        metadata=evidence_metadata(item),
        excluded_llm_metadata_keys=list(HIDDEN_METADATA),
        excluded_embed_metadata_keys=list(HIDDEN_METADATA),
    )
    return NodeWithScore(node=node, score=relevance(item))


class ExternalQueryRetriever(ServiceOwner, BaseRetriever):
    """A retriever over ``ExternalQueryService``: at most ``k`` nodes, best score first;
    none unless the chain answered. ``query_semantics`` applies to every retrieval.

    ``service=`` shares a service; ``settings=`` makes one this retriever owns and closes in
    ``close()`` (or ``with``/``async with``, on collection, at exit).
    """

    def __init__(
        self,
        *,
        service: ExternalQueryService | None = None,
        settings: Settings | None = None,
        k: int = DEFAULT_K,
        query_semantics: SemanticsInput = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.k = positive_k(k)
        self.query_semantics: QuerySemantics | None = coerce_semantics(query_semantics)
        self._handle = ServiceHandle(service, settings)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _nodes(self, answer: ExternalAnswer) -> list[NodeWithScore]:
        nodes = [_node(item) for item in cited_evidence(answer)[: self.k]]
        dispatcher.event(ExternalQueryOutcome(**outcome(answer, len(nodes))))
        return nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(self.service.answer(query_bundle.query_str, self.query_semantics))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        answer = await self.service.aanswer(query_bundle.query_str, self.query_semantics)
        return self._nodes(answer)


def external_query_tool(
    *,
    service: ExternalQueryService | None = None,
    settings: Settings | None = None,
    name: str = TOOL_NAME,
    description: str = TOOL_DESCRIPTION,
    query_semantics: SemanticsInput = None,
) -> FunctionTool:
    """A ``FunctionTool`` that answers a question from external evidence, sync and async.

    Its ``fn_schema`` is ``question`` plus every ``QuerySemantics`` field (``query_kind``
    limited to the service's kinds); arguments are checked against it on every call (an
    agent passes the model's arguments unchecked), a bad one is an ``InvalidQuery``. The
    output's content is the presenter's text and a status line, its ``raw_output`` the
    ``ExternalAnswer``. With ``settings=`` the tool owns its service, which closes when the
    tool is collected or at exit; pass ``service=`` to decide that yourself.
    """
    handle = ServiceHandle(service, settings)
    schema = tool_arguments_model(handle.service.query_kinds)
    default = coerce_semantics(query_semantics)

    # The closures hold the handle, so an owned service lives exactly as long as the tool.
    def ask(**arguments: Any) -> ExternalAnswer:
        question, semantics = parse_tool_arguments(schema, arguments, default)
        return handle.service.answer(question, semantics)

    async def aask(**arguments: Any) -> ExternalAnswer:
        question, semantics = parse_tool_arguments(schema, arguments, default)
        return await handle.service.aanswer(question, semantics)

    tool: FunctionTool = FunctionTool.from_defaults(
        fn=ask,
        async_fn=aask,
        name=name,
        description=description,
        fn_schema=schema,
        callback=tool_text,
    )
    return tool
