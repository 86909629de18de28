"""A loopback chat completions endpoint for the LLM tests: replies from a script and keeps
every request body it received. A scripted reply can carry token log-probabilities
(``logprob_tokens``) and its own token usage.

``LoopbackServer`` records no request bodies (and leaves a POST body unread on the
connection), so this subclass reads the body before routing, records it, and hands it to
the script step.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from external_query_service.settings import LLMSettings
from external_query_service.testing import LoopbackServer, RecordedRequest, Reply, json_reply

CHAT_PATH = "/v1/chat/completions"

Step = Reply | Callable[[dict[str, Any]], Reply]


def completion(
    content: str | None,
    *,
    finish_reason: str | None = "stop",
    refusal: str | None = None,
    model: str = "fake-model-2026",
    logprobs: list[dict[str, Any]] | None = None,
    usage: dict[str, int] | None = None,
    delay_s: float = 0.0,
) -> Reply:
    """A chat completion in the OpenAI Chat Completions shape whose message says ``content``,
    with ``logprobs.content`` set to ``logprobs`` when given, and sent after ``delay_s``."""
    reply = json_reply(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1_780_000_000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": refusal},
                    "logprobs": None if logprobs is None else {"content": logprobs},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    )
    reply.delay_s = delay_s
    return reply


def _token(text: str, probability: float, top: Mapping[str, float]) -> dict[str, Any]:
    def entry(token: str, p: float) -> dict[str, Any]:
        return {"token": token, "logprob": math.log(p), "bytes": list(token.encode("utf-8"))}

    return entry(text, probability) | {"top_logprobs": [entry(t, p) for t, p in top.items()]}


def logprob_tokens(
    content: str, weights: Mapping[str, Mapping[str, float]]
) -> list[dict[str, Any]]:
    """``logprobs.content`` for ``content``: each JSON string value named in ``weights`` is
    one token whose alternatives are ``weights[value]`` (token → probability, the value
    itself included); the rest comes in certain tokens of at most four characters."""
    spans: list[tuple[int, str]] = []
    for value in weights:
        at = content.find(f'"{value}"')
        assert at >= 0, value
        spans.append((at + 1, value))
    tokens: list[dict[str, Any]] = []
    position = 0
    for at, value in sorted(spans):
        while position < at:
            piece = content[position : min(at, position + 4)]
            tokens.append(_token(piece, 1.0, {piece: 1.0}))
            position += len(piece)
        top = weights[value]
        tokens.append(_token(value, top[value], top))
        position = at + len(value)
    while position < len(content):
        piece = content[position : position + 4]
        tokens.append(_token(piece, 1.0, {piece: 1.0}))
        position += len(piece)
    return tokens


def answer_json(value: Any) -> Reply:
    """A completion whose content is ``value`` as JSON text."""
    return completion(json.dumps(value, ensure_ascii=False))


def api_error(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    return json_reply(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}, status=status
    )


class ChatServer(LoopbackServer):
    """``POST /v1/chat/completions`` answered by ``script`` steps, in order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.script: list[Step] = []
        super().__init__()
        self.route(CHAT_PATH, self._answer)

    @property
    def base_url(self) -> str:
        return self.url("/v1")

    def settings(self, **overrides: Any) -> LLMSettings:
        fields: dict[str, Any] = {
            "base_url": self.base_url,
            "model": "fake-model",
            "timeout_s": 5.0,
            "max_retries": 0,
        }
        fields.update(overrides)
        return LLMSettings(**fields)

    def then(self, *steps: Step) -> ChatServer:
        with self._lock:
            self.script.extend(steps)
        return self

    def messages(self, index: int = -1) -> list[dict[str, Any]]:
        """The messages of the ``index``-th request received."""
        return list(self.bodies[index]["messages"])

    def _answer(self, request: RecordedRequest) -> Reply:
        body: dict[str, Any] = json.loads(request.body.decode("utf-8")) if request.body else {}
        with self._lock:
            self.bodies.append(body)
            step = self.script.pop(0) if self.script else None
        if step is None:
            return api_error(500, "the test script has no reply left", "api_error")
        return step(body) if callable(step) else step
