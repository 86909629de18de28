"""OpenAI's chat-completions wire format over the answer chain, for the chat front-ends and
SDKs that speak it (Open WebUI, LibreChat, the ``openai`` client, most RAG stacks).

``GET /v1/models`` lists one model, ``external-query``; ``POST /v1/chat/completions``
answers whatever model name it is sent. The last user message is the question. The earlier
user messages are the follow-up context a session keeps: the service plans them in turn
(the first afresh, each later one as a follow-up of the one before, no page read) and asks
the question as a follow-up of the last, so "and tomorrow?" keeps the place and the kind a
chat front-end sent before (every request carries the whole conversation, so any worker
answers it, with nothing kept between requests). With only ``local_docs`` sources
(``serve --docs``) a chat question is a ``documentation`` question, as it is for ``ask
--docs``. Other OpenAI parameters (``temperature``, ``max_tokens`` ...) are accepted and
ignored: the answer is quoted evidence, not sampled text.

The reply is an ordinary assistant message whatever the outcome (``insufficient_evidence``
and ``clarify`` included): its content is the answer text, ending with its Sources list.
The structured answer (status, reason, retryable, sources, evidence, uncertainties) rides
along in the extra field ``external_query``. With ``"stream": true`` the reply is OpenAI's
chunks (``data: {...}`` lines, then ``data: [DONE]``): the assistant role first, one chunk
per progress event as it happens (a line for a person in ``delta.reasoning_content``, the
event itself in ``external_query``), then the answer text as it is written and a last chunk
with ``finish_reason: "stop"`` and the structured answer. A failure after the stream began
is one ``data: {"error": {...}}`` line, which the ``openai`` client raises. Keys, limits,
request ids and the Host check are the other routes'.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ConfigDict, Field

from .._frozen import Frozen
from ..errors import ApiError, InvalidQuery
from ..models import ExternalAnswer, QuerySemantics
from ..observability._progress import describe
from ..service import ExternalQueryService, Session, coerce_semantics
from ._schemas import ErrorBody
from ._streaming import stream_answer

__all__ = [
    "CHAT_MODEL",
    "AssistantMessage",
    "ChatCompletion",
    "ChatRequest",
    "ChatTurn",
    "Choice",
    "ContentPart",
    "ModelCard",
    "ModelList",
    "add_chat_routes",
    "chat_question",
]

#: The one model ``GET /v1/models`` lists.
CHAT_MODEL = "external-query"
#: What the structured answer carries in the ``external_query`` field.
_STRUCTURED = ("status", "reason", "retryable", "sources", "evidence", "uncertainties")


class ContentPart(Frozen):
    """One part of a message's content; only ``text`` parts are read."""

    model_config = ConfigDict(extra="ignore")

    type: str
    text: str | None = None


class ChatTurn(Frozen):
    """One turn of the conversation."""

    model_config = ConfigDict(extra="ignore")

    role: str = Field(description="system, developer, user, assistant or tool.")
    content: str | list[ContentPart] | None = None

    @property
    def text(self) -> str:
        """The message's text (the text parts joined, when it has parts)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content or () if part.text is not None)


class ChatRequest(Frozen):
    """OpenAI's chat-completions request. Parameters not named here are accepted and
    ignored (sampling settings mean nothing to quoted evidence)."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(description=f"Any name; {CHAT_MODEL!r} is the one listed.")
    messages: list[ChatTurn] = Field(min_length=1)
    stream: bool = Field(default=False, description="Answer with OpenAI's streamed chunks.")


class AssistantMessage(Frozen):
    """The reply: the answer text, ending with its Sources list."""

    role: Literal["assistant"] = "assistant"
    content: str


class Choice(Frozen):
    """The one choice a completion holds."""

    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop"] = "stop"


class ChatCompletion(Frozen):
    """OpenAI's ``chat.completion`` object, plus the structured answer."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    external_query: dict[str, Any] = Field(
        description="The structured answer: status, reason, retryable, sources, evidence, "
        "uncertainties (as in POST /v1/answer)."
    )


class ModelCard(Frozen):
    """One model ``GET /v1/models`` lists."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "external-query"


class ModelList(Frozen):
    """OpenAI's model list."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


def chat_question(request: ChatRequest) -> tuple[list[str], str]:
    """The earlier user messages and the question (the last user message); a conversation
    with no user message is 422 ``invalid_request``."""
    asked = [message.text for message in request.messages if message.role == "user"]
    if not asked:
        raise ApiError(422, "invalid_request", "messages: no user message holds a question")
    return asked[:-1], asked[-1]


def _docs_only(service: ExternalQueryService) -> bool:
    enabled = [adapter for adapter in service.settings.adapters if adapter.enabled]
    return bool(enabled) and all(adapter.kind == "local_docs" for adapter in enabled)


async def _resumed(
    service: ExternalQueryService, earlier: Sequence[str], semantics: QuerySemantics | None
) -> Session:
    """A session whose last plan is the earlier questions', planned in turn (none read a
    page); an earlier message that is no question (empty, too long) is passed over."""
    plan = None
    for question in earlier:
        try:
            service.check_question(question)
        except InvalidQuery:
            continue
        if plan is None:
            plan = (await service.planner.plan(question, semantics)).plan
        else:
            plan = service.planner.plan_follow_up(question.strip(), plan, semantics).plan
    return service.session(history_limit=0, last_plan=plan)


def _structured(found: ExternalAnswer) -> dict[str, Any]:
    body = found.model_dump(mode="json", include=set(_STRUCTURED))
    return {name: body[name] for name in _STRUCTURED}


class _Chunks:
    """The streamed reply's framing: OpenAI's ``chat.completion.chunk`` lines."""

    def __init__(self, completion_id: str, created: int, model: str) -> None:
        self._head = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        """One chunk as a ``data:`` line."""
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _data({**self._head, "choices": [choice], **extra})

    def opening(self) -> str:
        """The first chunk: the assistant's role, before anything is known."""
        return self.chunk({"role": "assistant", "content": ""})

    def progress(self, name: str, data: dict[str, Any]) -> str:
        line = describe((name, data)) + "\n"
        return self.chunk({"reasoning_content": line}, external_query={"event": name, "data": data})

    def answer(self, body: dict[str, Any]) -> str:
        text: str = body["text"]
        # The text as the presenter wrote it, a line a chunk, as chat front-ends show it.
        pieces = [self.chunk({"content": line}) for line in text.splitlines(keepends=True)]
        pieces.append(self.chunk({}, "stop", external_query=body["external_query"]))
        return "".join(pieces) + "data: [DONE]\n\n"

    def error(self, reason: str, message: str) -> str:
        return _data({"error": {"reason": reason, "message": message}}) + "data: [DONE]\n\n"


def _data(value: object) -> str:
    return f"data: {json.dumps(value, ensure_ascii=False)}\n\n"


def add_chat_routes(
    app: FastAPI,
    service: ExternalQueryService,
    *,
    answered: Callable[
        [str, str, Callable[[], Awaitable[ExternalAnswer]]], Awaitable[ExternalAnswer]
    ],
    heartbeat_s: float,
    count_error: Callable[[str], None],
) -> None:
    """Add ``GET /v1/models`` and ``POST /v1/chat/completions`` to ``app``;
    ``answered(route, question, call)`` runs a question under the app's deadline, metrics
    and answer log."""
    started = int(time.time())
    docs_only = _docs_only(service)

    @app.get("/v1/models", response_model=ModelList, summary="The one model (OpenAI's format)")
    async def models() -> ModelList:
        return ModelList(data=[ModelCard(id=CHAT_MODEL, created=started)])

    @app.post(
        "/v1/chat/completions",
        response_model=ChatCompletion,
        responses={
            400: {"model": ErrorBody, "description": "The body is not JSON."},
            422: {"model": ErrorBody, "description": "No question, or an unacceptable one."},
            504: {"model": ErrorBody, "description": "The question ran past the deadline."},
        },
        summary="Answer the last user message (OpenAI's chat-completions format)",
    )
    async def chat_completions(request: ChatRequest, http: Request) -> Response:
        earlier, question = chat_question(request)
        semantics = coerce_semantics({"query_kind": "documentation"} if docs_only else None)
        # Refused with its 4xx before a stream could begin.
        service.check_question(question, semantics)
        completion_id = f"chatcmpl-{secrets.token_hex(12)}"
        created = int(time.time())

        async def ask() -> ExternalAnswer:
            # Under the request's deadline, like the question: a planner model may be slow.
            session = await _resumed(service, earlier, semantics)
            return await session.afollow_up(question, semantics)

        async def run() -> dict[str, Any]:
            found = await answered("chat", question, ask)
            return {"text": found.text, "external_query": _structured(found)}

        if request.stream:
            chunks = _Chunks(completion_id, created, request.model)
            return stream_answer(
                run, heartbeat_s=heartbeat_s, count_error=count_error, framing=chunks
            )
        body = await run()
        completion = ChatCompletion(
            id=completion_id,
            created=created,
            model=request.model,
            choices=[Choice(message=AssistantMessage(content=body["text"]))],
            external_query=body["external_query"],
        )
        return JSONResponse(completion.model_dump(mode="json"))
