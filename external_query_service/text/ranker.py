"""The fitted passage ranker: features of a passage, weighed by a small versioned JSON file.

Each passage gathered for a question is described by ``FEATURES``, each a number in 0..1:

- ``coverage``: the rarity-weighted share of the query's terms it mentions (``score``);
- ``answering``: the same share counting only the terms it tells outside the spans that ask
  the question (``echo``): an introduction that restates the question scores low here;
- ``bm25``: Okapi BM25 of the passage (term frequencies, length against the collection's
  average, ``k1 = 1.2``, ``b = 0.75``) over the question's term statistics, divided by its
  largest possible value;
- ``proximity``: the rarity-weighted share of the query's terms found together within
  ``PROXIMITY_CHARS`` characters;
- ``title``: the rarity-weighted share of the query's terms its page's title mentions;
- ``page_position`` (``1 / (1 + page rank)``, the search engine's order), ``offset_position``
  (``1 / (1 + offset / 360)``, where on its page it sits) and ``length`` (characters over 360,
  at most 1);
- ``question_share``: the share of its characters inside spans that ask (``echo``);
- ``link_share``: the share of its lines that read as navigation (``chunk.navigation_line``).

The weights are fitted, not set by hand: ``tools/fit_ranker.py`` fits them on the fitting
halves of the ranking benchmark (``bench/ranking.py``) by pairwise logistic regression (a
passage holding the answer against one that does not, from the same question), then fits a
logistic calibration (Platt) that turns the linear score into the probability that a passage
holds the answer, and picks ``threshold``: when no passage of a question reaches it, nothing
gathered answers the question. The file is read once; scoring is pure Python arithmetic, the
same inputs always give the same scores.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Final

from .chunk import navigation_line
from .echo import fold, question_spans
from .score import MAX_QUERY_CHARS, TermStats, coverage_points, text_terms
from .tokens import query_terms, terms

__all__ = [
    "FEATURES",
    "PROXIMITY_CHARS",
    "WEIGHTS_FILE",
    "RankerModel",
    "RankerPassage",
    "features",
    "load_model",
    "model_from_json",
    "rank_probabilities",
]

#: The features, in the order of the weights in ``WEIGHTS_FILE``.
FEATURES: Final = (
    "coverage",
    "answering",
    "bm25",
    "proximity",
    "title",
    "page_position",
    "offset_position",
    "length",
    "question_share",
    "link_share",
)
#: The window within which query terms count as found together.
PROXIMITY_CHARS: Final = 80
#: The fitted weights, inside the package.
WEIGHTS_FILE: Final = "ranker_weights.json"
_K1: Final = 1.2
_B: Final = 0.75
_SPAN: Final = 360


@dataclass(frozen=True)
class RankerPassage:
    """A passage to rank: its text, its page's title, the page's rank in the search results
    (0 first) and the passage's offset on its page."""

    text: str
    title: str = ""
    page: int = 0
    offset: int = 0


@dataclass(frozen=True)
class RankerModel:
    """Weights per feature, the calibration ``p = 1 / (1 + exp(-(scale × s + bias)))`` of the
    linear score ``s``, and the probability a question's best passage must reach."""

    version: int
    weights: tuple[float, ...]
    scale: float
    bias: float
    threshold: float

    def linear(self, values: Sequence[float]) -> float:
        """The fitted score of a passage with these feature values: what orders passages."""
        return sum(w * x for w, x in zip(self.weights, values, strict=True))

    def probability(self, values: Sequence[float]) -> float:
        """The calibrated probability that a passage with these feature values answers (an
        increasing function of ``linear``)."""
        z = self.scale * self.linear(values) + self.bias
        return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def model_from_json(data: str) -> RankerModel:
    """A ``RankerModel`` from the JSON ``tools/fit_ranker.py`` writes; ``ValueError`` when its
    features are not ``FEATURES``."""
    document = json.loads(data)
    if tuple(document["features"]) != FEATURES:
        raise ValueError("ranker weights name other features than text.ranker.FEATURES")
    return RankerModel(
        version=int(document["version"]),
        weights=tuple(float(document["weights"][name]) for name in FEATURES),
        scale=float(document["calibration"]["scale"]),
        bias=float(document["calibration"]["bias"]),
        threshold=float(document["threshold"]),
    )


@cache
def load_model() -> RankerModel:
    """The packaged model (read once)."""
    return model_from_json(resources.files(__package__).joinpath(WEIGHTS_FILE).read_text("utf-8"))


class _Collection:
    """BM25's view of a question's term statistics: idf per query term, average length."""

    def __init__(self, query: str, stats: TermStats) -> None:
        self.terms = tuple(dict.fromkeys(query_terms(query[:MAX_QUERY_CHARS])))
        n = max(stats.chunks, 1)
        self.idf = {
            term: math.log(1 + (n - df + 0.5) / (df + 0.5))
            for term in self.terms
            for df in (stats.df(term),)
        }
        self.total = sum(self.idf.values())
        lengths = [len(chunk) for chunk in stats.chunk_terms]
        self.average = sum(lengths) / len(lengths) if lengths else 1.0

    def share(self, present: set[str] | frozenset[str]) -> float:
        if not self.total:
            return 0.0
        return sum(w for t, w in self.idf.items() if t in present) / self.total

    def bm25(self, counts: Mapping[str, int]) -> float:
        if not self.total:
            return 0.0
        norm = _K1 * (1 - _B + _B * len(counts) / max(self.average, 1.0))
        score = sum(
            weight * counts[term] * (_K1 + 1) / (counts[term] + norm)
            for term, weight in self.idf.items()
            if counts.get(term)
        )
        return score / (self.total * (_K1 + 1))

    def proximity(self, folded: str) -> float:
        """The best share of the query's weight found within ``PROXIMITY_CHARS``."""
        hits: list[tuple[int, str]] = []
        for term in self.terms:
            start = folded.find(term)
            while start >= 0 and self.idf[term]:
                hits.append((start, term))
                start = folded.find(term, start + 1)
        if not hits or not self.total:
            return 0.0
        hits.sort()
        best = 0.0
        for index, (start, _) in enumerate(hits):
            inside = {t for p, t in hits[index:] if p < start + PROXIMITY_CHARS}
            best = max(best, sum(self.idf[t] for t in inside))
        return best / self.total


def features(query: str, passages: Sequence[RankerPassage], stats: TermStats) -> list[list[float]]:
    """``FEATURES`` of each passage for ``query`` over the question's ``stats``."""
    collection = _Collection(query, stats)
    covered = coverage_points(query, [p.text for p in passages], stats)
    question = fold(query[:MAX_QUERY_CHARS])
    rows: list[list[float]] = []
    for passage, (whole, told) in zip(passages, covered, strict=True):
        cut = text_terms(passage.text)  # cut once: kept from the coverage just computed
        folded = cut.folded
        lines = [line for line in passage.text.split("\n") if line.strip()]
        asked = sum(end - start for start, end in _merged(question_spans(folded, question)))
        rows.append(
            [
                whole / 10000,
                told / 10000,
                collection.bm25(cut.counts),
                collection.proximity(folded),
                collection.share(set(terms(passage.title))) if passage.title else 0.0,
                1 / (1 + passage.page),
                1 / (1 + passage.offset / _SPAN),
                min(len(passage.text), _SPAN) / _SPAN,
                asked / max(len(folded), 1),
                sum(map(navigation_line, lines)) / max(len(lines), 1),
            ]
        )
    return rows


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def rank_probabilities(
    query: str,
    passages: Sequence[RankerPassage],
    stats: TermStats,
    model: RankerModel | None = None,
) -> list[float]:
    """The calibrated probability that each passage holds the answer to ``query``."""
    fitted = model or load_model()
    return [fitted.probability(row) for row in features(query, passages, stats)]
