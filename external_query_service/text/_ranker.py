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
- ``link_share``: the share of its lines that read as navigation (``chunk.navigation_line``);
- ``coverage_best``, ``answering_best``, ``bm25_best``, ``proximity_best``: the first four over
  their largest value among the question's passages (0 when that is 0). What counts is how a
  passage compares with the others gathered for the same question: a question whose words
  are all rare and one whose words are all common give scores of different sizes;
- ``page_best``: ``coverage`` over the largest ``coverage`` among the passages of its own page;
- ``agreement``: how far the other pages say the same thing. For each other page, the largest
  overlap (``|A ∩ B| / sqrt(|A| |B|)``) between the passage's terms and those of a passage of
  that page, the question's own terms left out of both; averaged over the other pages. Pages
  that answer a question tend to agree on the answer, while each page's digressions are its
  own. ``agreement_best``: the same over its largest value among the question's passages;
- ``title_lines``: the share of its characters on lines that repeat its page's title (the
  line holds the title or the title holds the line, or they open with the same
  ``TITLE_PREFIX`` characters: a title cut short or extended by the site's name);
- ``told_length``: the characters outside those lines, over 360, at most 1: a passage that is
  its page's title and little else tells nothing.

The model is fitted, not set by hand: ``tools/fit_ranker.py`` fits it on the fitting halves of
the ranking benchmark (``bench/ranking.py``). A passage's fitted score is a linear part, a
weight per feature (pairwise logistic regression: a passage holding the answer against one
that does not, from the same question; its L2 penalty chosen by cross-validation on the
fitting halves), plus the sum of a few small regression trees boosted on top of it
(LambdaRank, their number and depth chosen by cross-validation too; none when the linear part
alone does better). A tree is stored flat: node ``i`` sends a passage to ``left[i]`` when its
value of feature ``features[i]`` is at most ``thresholds[i]``, else to ``right[i]``; a child
below zero is the leaf ``~child``, whose value ``leaves[~child]`` the tree adds. A logistic
calibration (Platt) turns the score into the probability that a passage holds the answer,
and ``threshold`` is the probability a question's best passage must reach: when none does,
nothing gathered answers the question. The file is read once; scoring is pure Python
arithmetic and comparisons, the same inputs always give the same scores.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Final

from ._chunk import navigation_line
from ._echo import fold, question_spans
from ._score import MAX_QUERY_CHARS, TermStats, coverage_points, text_terms
from ._tokens import query_terms, terms

__all__ = [
    "FEATURES",
    "PROXIMITY_CHARS",
    "TITLE_PREFIX",
    "WEIGHTS_FILE",
    "RankerModel",
    "RankerPassage",
    "Tree",
    "features",
    "load_model",
    "model_from_json",
    "rank_probabilities",
    "tree_from_json",
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
    "coverage_best",
    "answering_best",
    "bm25_best",
    "proximity_best",
    "page_best",
    "agreement",
    "agreement_best",
    "title_lines",
    "told_length",
)
#: The window within which query terms count as found together.
PROXIMITY_CHARS: Final = 80
#: A line and a page title that open with this many of the same (folded) characters are one.
TITLE_PREFIX: Final = 12
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
class Tree:
    """One regression tree, flat (module docstring): per split node its feature's index, its
    threshold and its two children; a child below zero is the leaf ``~child``."""

    features: tuple[int, ...]
    thresholds: tuple[float, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]
    leaves: tuple[float, ...]

    def value(self, values: Sequence[float]) -> float:
        """The leaf value this tree gives a passage with these feature values."""
        if not self.features:
            return self.leaves[0]
        node = 0
        features, thresholds, left, right = self.features, self.thresholds, self.left, self.right
        while node >= 0:
            node = left[node] if values[features[node]] <= thresholds[node] else right[node]
        return self.leaves[~node]


@dataclass(frozen=True)
class RankerModel:
    """Weights per feature and the trees boosted on them (module docstring), the calibration
    ``p = 1 / (1 + exp(-(scale × s + bias)))`` of the fitted score ``s``, and the probability
    a question's best passage must reach."""

    version: int
    weights: tuple[float, ...]
    scale: float
    bias: float
    threshold: float
    trees: tuple[Tree, ...] = ()

    def score(self, values: Sequence[float]) -> float:
        """The fitted score of a passage with these feature values: what orders passages."""
        linear = sum(w * x for w, x in zip(self.weights, values, strict=True))
        return linear + sum(tree.value(values) for tree in self.trees)

    def probability(self, values: Sequence[float]) -> float:
        """The calibrated probability that a passage with these feature values answers (an
        increasing function of ``score``)."""
        z = self.scale * self.score(values) + self.bias
        return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def tree_from_json(data: Mapping[str, Sequence[float]], features: int = len(FEATURES)) -> Tree:
    """A ``Tree`` from its flat JSON form, over ``features`` features (the ranker's by
    default); ``ValueError`` when it is malformed: its lists of different lengths, a feature
    or a child out of range, or a child before its parent (so every walk ends at a leaf)."""
    tree = Tree(
        features=tuple(int(i) for i in data["features"]),
        thresholds=tuple(float(t) for t in data["thresholds"]),
        left=tuple(int(i) for i in data["left"]),
        right=tuple(int(i) for i in data["right"]),
        leaves=tuple(float(v) for v in data["leaves"]),
    )
    nodes, leaves = len(tree.features), len(tree.leaves)
    children = (*tree.left, *tree.right)
    if (
        not leaves
        or len(tree.thresholds) != nodes
        or len(tree.left) != nodes
        or len(tree.right) != nodes
        or leaves != nodes + 1
        or any(not 0 <= i < features for i in tree.features)
        or any(not -leaves <= child < nodes for child in children)
        # Children sit after their parent, so a walk always ends at a leaf.
        or any(
            0 <= child <= node
            for node in range(nodes)
            for child in (tree.left[node], tree.right[node])
        )
    ):
        raise ValueError("a tree is malformed")
    return tree


def model_from_json(data: str) -> RankerModel:
    """A ``RankerModel`` from the JSON ``tools/fit_ranker.py`` writes (``trees`` may be absent:
    a linear model); ``ValueError`` when its features are not ``FEATURES`` or a tree is
    malformed."""
    document = json.loads(data)
    if tuple(document["features"]) != FEATURES:
        raise ValueError("ranker weights name other features than text.ranker.FEATURES")
    return RankerModel(
        version=int(document["version"]),
        weights=tuple(float(document["weights"][name]) for name in FEATURES),
        scale=float(document["calibration"]["scale"]),
        bias=float(document["calibration"]["bias"]),
        threshold=float(document["threshold"]),
        trees=tuple(tree_from_json(tree) for tree in document.get("trees", ())),
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
        # Distinct terms per chunk, averaged: the same int sum over the same count, so the
        # same float as averaging the lengths one by one.
        self.average = stats.term_total / stats.chunks if stats.chunks else 1.0

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
        # The window from each hit: the hits fewer than PROXIMITY_CHARS after it, a run of the
        # sorted list whose terms are counted as it slides instead of gathered again for every
        # hit (a passage that repeats the query's terms has dozens of hits).
        # The window's weight can rise only when a term it lacked comes into it: summed then.
        inside: dict[str, int] = {}
        right = 0
        changed = True
        for start, term in hits:
            limit = start + PROXIMITY_CHARS
            while right < len(hits) and hits[right][0] < limit:
                entering = hits[right][1]
                held = inside.get(entering, 0)
                inside[entering] = held + 1
                changed = changed or not held
                right += 1
            if changed:
                # Summed in the query's order, not the set's (which changes with the hash
                # seed): the same passage scores the same to the last bit in every process.
                best = max(best, sum(self.idf[t] for t in self.terms if inside.get(t)))
                changed = False
            inside[term] -= 1  # this hit leaves the window
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
    own_terms = set(collection.terms)
    agreement = _agreement(passages, [text_terms(p.text).present - own_terms for p in passages])
    best = [max((row[k] for row in rows), default=0.0) for k in range(4)]
    page_best: dict[int, float] = {}
    for passage, row in zip(passages, rows, strict=True):
        page_best[passage.page] = max(page_best.get(passage.page, 0.0), row[0])
    most_agreed = max(agreement, default=0.0)
    for passage, row, agreed in zip(passages, rows, agreement, strict=True):
        titled, told = _title_lines(passage.text, passage.title)
        row += [
            *(_over(row[k], best[k]) for k in range(4)),
            _over(row[0], page_best[passage.page]),
            agreed,
            _over(agreed, most_agreed),
            titled / max(titled + told, 1),
            min(told, _SPAN) / _SPAN,
        ]
    return rows


def _over(value: float, largest: float) -> float:
    return value / largest if largest > 0 else 0.0


def _agreement(passages: Sequence[RankerPassage], bags: Sequence[AbstractSet[str]]) -> list[float]:
    """``agreement`` of each passage (module docstring): over the other pages, the mean of
    the best overlap with one of that page's passages."""
    out: list[float] = []
    for passage, bag in zip(passages, bags, strict=True):
        best: dict[int, float] = {}
        for other, its in zip(passages, bags, strict=True):
            if other.page == passage.page:
                continue
            overlap = len(bag & its) / math.sqrt(len(bag) * len(its)) if bag and its else 0.0
            best[other.page] = max(best.get(other.page, 0.0), overlap)
        out.append(sum(best.values()) / len(best) if best else 0.0)
    return out


def _title_lines(text: str, title: str) -> tuple[int, int]:
    """The characters of ``text``'s lines that repeat ``title``, and those of the others."""
    wanted = fold(title)
    titled = told = 0
    for line in text.split("\n"):
        folded = fold(line)
        if not folded:
            continue
        same = bool(wanted) and (
            folded in wanted
            or wanted in folded
            or (len(folded) >= TITLE_PREFIX and folded[:TITLE_PREFIX] == wanted[:TITLE_PREFIX])
        )
        if same:
            titled += len(line.strip())
        else:
            told += len(line.strip())
    return titled, told


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
