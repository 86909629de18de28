"""The presenter stage: ``ExternalContextPacket`` -> the reader's answer, from the packet only.

``extractive`` renders the answer contracts' templates from quoted evidence;
``model`` lets an OpenAI-compatible model write the text and keeps it only when
``grounding`` finds every sentence in the evidence it cites. Names are imported on first
access, so a service without a model never loads the client.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .extractive import (
        ANSWER_PREFIX,
        ANSWER_PREFIXES,
        LINK_REMOVED,
        ExternalAnswerPresenter,
        ListedSource,
        display_sources,
        listed_sources,
        strip_invisible,
    )
    from .model import CheckedAnswer, LLMAnswerPresenter, ModelAnswer, check_answer

_EXPORTS = {
    "ANSWER_PREFIX": ".extractive",
    "ANSWER_PREFIXES": ".extractive",
    "LINK_REMOVED": ".extractive",
    "CheckedAnswer": ".model",
    "ExternalAnswerPresenter": ".extractive",
    "LLMAnswerPresenter": ".model",
    "ListedSource": ".extractive",
    "ModelAnswer": ".model",
    "check_answer": ".model",
    "display_sources": ".extractive",
    "listed_sources": ".extractive",
    "strip_invisible": ".extractive",
}

__all__ = [
    "ANSWER_PREFIX",
    "ANSWER_PREFIXES",
    "LINK_REMOVED",
    "CheckedAnswer",
    "ExternalAnswerPresenter",
    "LLMAnswerPresenter",
    "ListedSource",
    "ModelAnswer",
    "check_answer",
    "display_sources",
    "listed_sources",
    "strip_invisible",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
