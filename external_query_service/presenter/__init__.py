"""The presenter stage: ``ExternalContextPacket`` -> the reader's answer, from the packet only.

``Presenter`` is the stage, one object holding both ways of answering: ``extractive``
renders the answer contracts' templates from quoted evidence; ``model`` lets an
OpenAI-compatible model write the text and keeps it only when ``grounding`` finds every
sentence in the evidence it cites. Names are imported on first access, so a service without
a model never loads the client.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._extractive import (
        ANSWER_PREFIX,
        ANSWER_PREFIXES,
        LINK_REMOVED,
        ExtractivePresenter,
        ListedSource,
        display_sources,
        listed_sources,
        strip_invisible,
    )
    from ._model import CheckedAnswer, ModelAnswer, ModelPresenter, check_answer
    from ._presenter import Presenter

_EXPORTS = {
    "ANSWER_PREFIX": "._extractive",
    "ANSWER_PREFIXES": "._extractive",
    "LINK_REMOVED": "._extractive",
    "CheckedAnswer": "._model",
    "ExtractivePresenter": "._extractive",
    "ModelPresenter": "._model",
    "ListedSource": "._extractive",
    "ModelAnswer": "._model",
    "Presenter": "._presenter",
    "check_answer": "._model",
    "display_sources": "._extractive",
    "listed_sources": "._extractive",
    "strip_invisible": "._extractive",
}

__all__ = [
    "ANSWER_PREFIX",
    "ANSWER_PREFIXES",
    "LINK_REMOVED",
    "CheckedAnswer",
    "ExtractivePresenter",
    "ListedSource",
    "ModelAnswer",
    "ModelPresenter",
    "Presenter",
    "check_answer",
    "display_sources",
    "listed_sources",
    "strip_invisible",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    _EXPORTS,
    old_names={
        "ExternalAnswerPresenter": "ExtractivePresenter",
        "LLMAnswerPresenter": "ModelPresenter",
    },
)
