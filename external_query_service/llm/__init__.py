"""The client for an optional OpenAI-compatible model (``ChatCompletionsClient``).

One client per service, built from ``Settings.llm``; the planner's ``LLMPlanner`` and the
presenter's ``ModelPresenter`` receive it and never build their own. The model proposes
and drafts; code validates, and every failure falls back to the model-free path with its
reason.

    client = ChatCompletionsClient(settings.llm)
    planner = Planner(LLMPlanner(client, clock=clock))
    presenter = ModelPresenter(client)
"""

from ._client import (
    ChatCompletionsClient,
    ChatMessage,
    Completion,
    LLMError,
    ResponseMode,
    TokenLogprob,
    TokenUsage,
    json_schema_for,
)

__all__ = [
    "ChatCompletionsClient",
    "ChatMessage",
    "Completion",
    "LLMError",
    "ResponseMode",
    "TokenLogprob",
    "TokenUsage",
    "json_schema_for",
]
