"""An optional model behind the planner and the presenter (any OpenAI-compatible endpoint).

One ``ChatCompletionsClient`` per service, built from ``Settings.llm``; ``LLMPlanner`` and
``LLMAnswerPresenter`` receive it and never build their own. The model proposes and drafts;
code validates, and every failure falls back to the model-free path with its reason.

    client = ChatCompletionsClient(settings.llm)
    planner = ExternalQueryPlanner(LLMPlanner(client, clock=clock))
    presenter = LLMAnswerPresenter(client)
"""

from .client import (
    ChatCompletionsClient,
    ChatMessage,
    Completion,
    LLMError,
    ResponseMode,
    TokenLogprob,
    TokenUsage,
    json_schema_for,
)
from .planner import LLMPlanner
from .presenter import AnswerRejected, LLMAnswerPresenter, ModelAnswer, check_answer

__all__ = [
    "AnswerRejected",
    "ChatCompletionsClient",
    "ChatMessage",
    "Completion",
    "LLMAnswerPresenter",
    "LLMError",
    "LLMPlanner",
    "ModelAnswer",
    "ResponseMode",
    "TokenLogprob",
    "TokenUsage",
    "check_answer",
    "json_schema_for",
]
