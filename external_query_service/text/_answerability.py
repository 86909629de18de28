"""Does a passage answer the question, or only mention it? A fitted, calibrated judgment.

The ranker (``_ranker``) orders a question's passages against one another; half of its
features say how a passage compares with the others gathered for the same question, so the
best of five passages that only share the question's topic looks as good as the best of five
that answer it. This judgment reads each passage on its own: what of the question it states,
and how close together, never how it compares with its neighbours or where the search engine
listed it. Its features (``FEATURES``, each a number in 0..1):

- ``coverage``, ``answering``, ``bm25``, ``proximity``, ``title``, ``length``,
  ``question_share``, ``link_share``, ``title_lines``, ``told_length``: the ranker's features
  of the same names (``_ranker``'s docstring), those that describe the passage itself;
- ``gram_coverage``: the rarity-weighted share of the question's character bigrams the
  passage holds. Segmentation cuts a name or a compound one way in the question and another
  way in a passage (``BX700Pro`` and ``BX 700 Pro``), and a colloquial word meets its written
  form in one character of two: bigrams survive both. Rarity is counted over the question's
  own distinct passages (a passage copied on several pages counts once: ``_score.copies``),
  so a bigram every passage holds (the topic) weighs little and one only some hold (what is
  asked about it) much;
- ``gram_proximity``: the largest such share found within ``WINDOW`` characters: the
  question's specifics stated together, as an answer states them;
- ``gram_answering``: ``gram_coverage`` counting only bigrams outside spans that restate the
  question (``echo``): a passage that asks the question again does not answer it;
- ``alignment``: how much of the question, in its own order, a stretch of the passage as long
  as the question states (rapidfuzz's ``partial_ratio`` over letters and digits, spans that
  restate the question left out). A passage that answers states the question's words as a
  statement, in their order, with the answer in place of the question word; one that shares
  the topic scatters them;
- ``terms_held``, ``terms_missing``, ``longest_missing``: the share of the question's terms
  the passage holds (as folded text, so a term inside a longer word counts), how many it
  misses and the longest it misses (each up to ``_MISSING_CAP``, over it);
- ``held_nowhere``, ``longest_nowhere``: the same for the terms no passage of the question
  holds (the same for every passage of a question).

A passage's probability is ``1 / (1 + exp(-(w · x + bias)))``, a logistic regression fitted
(``tools/fit_answerability.py``) on the passage the ranker puts first among five: one that
holds a gold answer against one of five same-topic passages none of which does, from public
reading-comprehension sets under noise ratios 0, 0.8 and 1; its weights ship in
``ANSWERABILITY_FILE``. ``threshold`` is the probability a passage must reach to count as
answering: a question whose first passage, the one quoted first, does not reach it is
declined (``no_matching_evidence``; ``_rerank.answered``). No list of question words or
answer types is written here: whatever cue the model uses, it learnt from data.

**The semantic judgment** (optional, the ``[semantic]`` extra; ``[answerability] semantic``):
``SEMANTIC_FEATURES`` are ``FEATURES`` plus ``semantic``, the cosine of the question's e5
embedding to the passage's (``_semantic.similarities``), and ``semantic_squared``, its square
(the cosine sits high for every passage on the topic, so the judgment gains from bending it).
Fitted the same way, on the same passages, its weights ship in ``SEMANTIC_FILE``; the default
judgment and its file are untouched by it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from itertools import pairwise
from typing import Final

from rapidfuzz import fuzz

from ._echo import fold, question_spans
from ._ranker import FEATURES as RANKER_FEATURES
from ._ranker import RankerPassage, Tree, tree_from_json
from ._ranker import features as ranker_features
from ._score import MAX_QUERY_CHARS, TermStats, copies, text_terms
from ._tokens import query_terms

__all__ = [
    "ANSWERABILITY_FILE",
    "FEATURES",
    "SEMANTIC_FEATURES",
    "SEMANTIC_FILE",
    "WINDOW",
    "AnswerabilityModel",
    "answerability_features",
    "load_answerability",
    "model_from_json",
]

#: The ranker's features this judgment reads: those that describe a passage on its own, not
#: how it compares with the others gathered (``*_best``, ``agreement``), where the engine
#: listed its page or where on its page it sits (every passage of a reading-comprehension set
#: opens its page). ``agreement`` would learn the sets' shape, not answers: a reading set's
#: answering paragraph is often asked alone, its unanswering ones with their article's others.
_SHARED: Final = tuple(
    name
    for name in RANKER_FEATURES
    if name not in ("page_position", "offset_position", "agreement") and not name.endswith("_best")
)
#: The features, in the order of the weights in ``ANSWERABILITY_FILE``.
FEATURES: Final = (
    *_SHARED,
    "gram_coverage",
    "gram_proximity",
    "gram_answering",
    "alignment",
    "terms_held",
    "terms_missing",
    "longest_missing",
    "held_nowhere",
    "longest_nowhere",
)
#: The semantic judgment's features, in the order of the weights in ``SEMANTIC_FILE``.
SEMANTIC_FEATURES: Final = (*FEATURES, "semantic", "semantic_squared")
#: The window within which the question's bigrams count as stated together.
WINDOW: Final = 80
#: The fitted weights, inside the package.
ANSWERABILITY_FILE: Final = "answerability_weights.json"
#: The semantic judgment's fitted weights, inside the package.
SEMANTIC_FILE: Final = "answerability_semantic_weights.json"
_MISSING_CAP: Final = 4
_SHARED_INDEX: Final = tuple(RANKER_FEATURES.index(name) for name in _SHARED)


@dataclass(frozen=True)
class AnswerabilityModel:
    """A weight per feature and a bias, the regression trees boosted on top of them (none
    for a linear model), and ``threshold``: the probability a question's first passage (in
    the ranker's order) must reach for the question to be answered. ``semantic``: the weights
    are for ``SEMANTIC_FEATURES`` (else ``FEATURES``)."""

    version: int
    weights: tuple[float, ...]
    bias: float
    threshold: float
    semantic: bool = False
    trees: tuple[Tree, ...] = ()

    def probability(self, values: Sequence[float]) -> float:
        """The calibrated probability that a passage with these feature values answers."""
        z = self.bias + sum(w * x for w, x in zip(self.weights, values, strict=True))
        z += sum(tree.value(values) for tree in self.trees)
        return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def model_from_json(data: str) -> AnswerabilityModel:
    """An ``AnswerabilityModel`` from the JSON ``tools/fit_answerability.py`` writes, for the
    features it names (``trees`` may be absent: a linear model); ``ValueError`` when they
    are neither ``FEATURES`` nor ``SEMANTIC_FEATURES``, or a tree is malformed."""
    document = json.loads(data)
    named = tuple(document["features"])
    if named not in (FEATURES, SEMANTIC_FEATURES):
        raise ValueError(
            "answerability weights name other features than FEATURES or SEMANTIC_FEATURES"
        )
    return AnswerabilityModel(
        version=int(document["version"]),
        weights=tuple(float(document["weights"][name]) for name in named),
        bias=float(document["bias"]),
        threshold=float(document["threshold"]),
        semantic=named == SEMANTIC_FEATURES,
        trees=tuple(tree_from_json(tree, len(named)) for tree in document.get("trees", ())),
    )


@cache
def load_answerability(semantic: bool = False) -> AnswerabilityModel:
    """The packaged model (read once): the semantic judgment's when ``semantic``."""
    name = SEMANTIC_FILE if semantic else ANSWERABILITY_FILE
    text = resources.files(__package__).joinpath(name).read_text("utf-8")
    return model_from_json(text)


def answerability_features(
    query: str,
    passages: Sequence[RankerPassage],
    stats: TermStats,
    ranker_rows: Sequence[Sequence[float]] | None = None,
    semantic: Sequence[float] | None = None,
    *,
    judged: Sequence[int] | None = None,
) -> list[list[float]]:
    """``FEATURES`` of each passage for ``query`` (of the passages at the indexes
    ``judged`` only, in that order, when given: the others still count in the bigrams'
    rarity and the terms no passage holds); ``ranker_rows``, the ranker's features of the
    same passages when already computed, are reused. With ``semantic``, each judged
    passage's similarity to ``query`` (``_semantic.similarities``), ``SEMANTIC_FEATURES``."""
    chosen = range(len(passages)) if judged is None else judged
    rows = ranker_rows if ranker_rows is not None else ranker_features(query, passages, stats)
    question = fold(query[:MAX_QUERY_CHARS])
    letters = _letters(question)
    named = tuple(dict.fromkeys(query_terms(query[:MAX_QUERY_CHARS])))
    grams = _bigrams(question)
    # The ranker cut each passage already (``text_terms`` keeps the cut): its folded text.
    folded = [text_terms(p.text).folded for p in passages]
    held = [{g for g in grams if g in text} for text in folded]
    # Rarity over the distinct passages: a passage copied on several pages counts once.
    distinct = [held[i] for i, first in enumerate(copies([p.text for p in passages])) if first == i]
    n = len(distinct)
    weight = {
        g: math.log(1 + (n - df + 0.5) / (df + 0.5))
        for g in grams
        for df in (sum(g in h for h in distinct),)
    }
    total = sum(weight.values())
    nowhere = [t for t in named if not any(t in text for text in folded)]
    question_wide = [
        len(nowhere) / len(named) if named else 0.0,
        min(max((len(t) for t in nowhere), default=0), _MISSING_CAP) / _MISSING_CAP,
    ]
    out: list[list[float]] = []
    for index in chosen:
        text, have = folded[index], held[index]
        asked = _asked(text, question)
        told = {g for g in have if any(not asked[i] for i in _places(text, g))}
        missing = [t for t in named if t not in text]
        out.append(
            [
                *(rows[index][i] for i in _SHARED_INDEX),
                _share(have, weight, total),
                _window(text, have, weight, total),
                _share(told, weight, total),
                _alignment(letters, text, asked),
                1 - len(missing) / len(named) if named else 0.0,
                min(len(missing), _MISSING_CAP) / _MISSING_CAP,
                min(max((len(t) for t in missing), default=0), _MISSING_CAP) / _MISSING_CAP,
                *question_wide,
            ]
        )
    if semantic is not None:
        for r, similarity in zip(out, semantic, strict=True):
            r += [similarity, similarity * similarity]
    return out


def _bigrams(folded: str) -> tuple[str, ...]:
    """The distinct character bigrams of ``folded``'s letters and digits (each run of
    them on its own; a run of one character is its own gram)."""
    grams: dict[str, None] = {}
    run: list[str] = []
    for char in (*folded, " "):
        if char.isalnum():
            run.append(char)
            continue
        if len(run) == 1:
            grams[run[0]] = None
        for a, b in pairwise(run):
            grams[a + b] = None
        run = []
    return tuple(grams)


def _letters(text: str) -> str:
    return "".join(char for char in text if char.isalnum())


def _alignment(letters: str, text: str, asked: list[bool]) -> float:
    """The best alignment of the question's ``letters`` within the passage's folded ``text``
    outside the spans that restate the question (``asked``), 0..1."""
    if not letters:
        return 0.0
    # ``asked`` has one more entry than ``text`` has characters (the end).
    told = "".join(
        char
        for char, inside in zip(text, asked[: len(text)], strict=True)
        if not inside and char.isalnum()
    )
    return fuzz.partial_ratio(letters, told) / 100


def _share(have: set[str], weight: dict[str, float], total: float) -> float:
    return sum(weight[g] for g in have) / total if total else 0.0


def _places(text: str, gram: str) -> list[int]:
    places = []
    start = text.find(gram)
    while start >= 0:
        places.append(start)
        start = text.find(gram, start + 1)
    return places


def _asked(text: str, question: str) -> list[bool]:
    """Per character of ``text``, whether it sits inside a span that restates the question."""
    inside = [False] * (len(text) + 1)
    for start, end in question_spans(text, question):
        for i in range(start, min(end, len(text))):
            inside[i] = True
    return inside


def _window(text: str, have: set[str], weight: dict[str, float], total: float) -> float:
    """The largest weight share of the question's bigrams found within ``WINDOW``."""
    if not total or not have:
        return 0.0
    hits = sorted((i, g) for g in have for i in _places(text, g))
    best = 0.0
    inside: dict[str, int] = {}
    right = 0
    for start, gram in hits:
        while right < len(hits) and hits[right][0] < start + WINDOW:
            inside[hits[right][1]] = inside.get(hits[right][1], 0) + 1
            right += 1
        best = max(best, sum(weight[g] for g, count in inside.items() if count))
        inside[gram] -= 1
    return best / total
