"""Fit the passage ranker on the fitting halves of bench/ranking.py; print both halves.

    python tools/fit_ranker.py [--dureader DIR] [--dureader-extra FILE ...] [--cmrc FILE]
                               [--drcd FILE] [--sample N] [--cache FILE]
                               [--learner linear|trees] [--out WEIGHTS_FILE]
                               [--cv-only] [--without FEATURE,...]

A dev-only script (nothing in the package imports it): the sets are found as
``bench/ranking.py`` finds them (``--cache`` as there: what the page chain kept is read back,
only the features are computed again), and only the questions of each set's *fitting* half
are fitted on (further DuReader train questions, ``--dureader-extra``, as more of the DuReader
set: ``families``). ``--cv-only`` stops after the cross-validation (nothing written, no
checking half printed); ``--without`` holds the named features at 0, so a feature is judged by
what the cross-validation does without it. Five steps, all deterministic (Newton's method
from zero weights, folds by a hash of the question id, LightGBM single-threaded in its
deterministic mode with a fixed seed):

1. **Pairwise logistic regression** (RankNet's loss on a linear scorer): for every question,
   every pair of its kept passages where one holds the answer and the other does not, minimise
   ``log(1 + exp(-w · (x_hit - x_miss)))`` plus ``λ/2 · |w|²``. Each question weighs the same
   within its set and each set the same in all, so no set outweighs the others by its size.
   A weight whose feature's meaning settles its side (``SIGNS``) stays on that side: while
   one is on the wrong side, the worst such feature is held at 0 and the rest fitted again.
2. **λ by cross-validation on the fitting halves**: the fitting questions are cut into
   ``FOLDS`` folds (a hash of the set and question id); for each λ of ``PENALTIES`` the
   weights are fitted on all folds but one and judged on the one left out; the λ with the best
   mean over the sets of the held-out top-1 and MRR wins, and the weights are fitted again on
   every fitting question with it. The checking halves play no part.
3. **Trees** (``--learner trees``; needs the ``fit`` extra, LightGBM): gradient boosted
   regression trees with LambdaRank's objective, started from the linear score (LightGBM's
   ``init_score``), so the trees learn what the linear part misses; the questions weigh as
   in step 1. Their number, depth, least passages per leaf and learning rate are chosen among
   ``TREE_GRID`` by the same cross-validation (each fold's trees start from the linear score
   fitted on that fold's training part), then fitted on every fitting question. The trees are
   written out flat and evaluated in pure Python by ``text._ranker``; the script checks that
   its evaluation gives LightGBM's own scores. The default learner is ``linear`` (no trees):
   the cross-validation preferred no trees to any of the grid, the trees' gain on the checking
   halves was one question per set or none, and they learnt a penalty for every page below the
   first that refuses a lone answer on a lower-ranked page (the pages above it blocked).
4. **Calibration** (Platt scaling): ``p = sigmoid(a · s + b)`` of the fitted score ``s``
   (linear part plus trees), fitted by logistic regression on whether each kept passage holds
   the answer.
5. **Threshold**: the probability a question's best passage must reach for it to be answered,
   chosen among the questions' best probabilities to minimise the questions answered with the
   answer nowhere in the kept evidence plus those refused although it was there (each set
   weighted the same).

Writes the weights file (``--out``, by default ``text._ranker``'s ``WEIGHTS_FILE`` in the
package) and prints the cross-validation figures, then ``bench/ranking.py``'s figures for
both halves of every set with the new model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from ranking import Served, family, parse, report, served_sets

from external_query_service.text._ranker import (
    FEATURES,
    WEIGHTS_FILE,
    RankerModel,
    model_from_json,
)

ROOT = Path(__file__).resolve().parents[1]

VERSION = 4
PENALTIES = (0.01, 0.03, 0.1, 0.3, 1.0)
FOLDS = 4
NEWTON_STEPS = 30
#: The trees' settings tried (step 3): (depth, least passages per leaf, learning rate), each
#: judged after every number of trees in ``TREE_ROUNDS``. Small on purpose: the ranker runs
#: on every kept passage in the service process.
TREE_GRID = tuple(
    (depth, leaf, rate) for depth in (2, 3) for leaf in (20, 50) for rate in (0.02, 0.05)
)
TREE_ROUNDS = (50, 100, 200)
SEED = 7
#: The side a weight must be on, where the feature's meaning settles it: restating the
#: question, navigation and lines repeating the page's title never count for a passage, and
#: a title naming the question's words never counts against it (what the passage itself
#: tells decides). Pages that only ask have no navigation and are titled with the question,
#: so unchecked, the navigation share learnt to count for a passage and the title against.
SIGNS: dict[str, int] = dict.fromkeys(("question_share", "link_share", "title_lines"), -1) | {
    "title": 1
}

Sets = list[tuple[str, list[Served]]]
Pairs = list[tuple[list[float], float]]


class _Weights(Protocol):
    """Weights as a fit returns them: a list, or a NumPy array (the judgment's fit)."""

    def __getitem__(self, index: int, /) -> float: ...


W = TypeVar("W", bound=_Weights)


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def _dot(w: Sequence[float], x: Sequence[float]) -> float:
    return sum(a * b for a, b in zip(w, x, strict=True))


def pairs(sets: Sets) -> Pairs:
    """(x_hit - x_miss, weight) for every pair of every question given, the weights summing
    to one (module docstring, step 1)."""
    out: Pairs = []
    present = [(name, served) for name, served in sets if served]
    for _, served in present:
        for item in served:
            hits = [r for r, label in zip(item.rows, item.labels, strict=True) if label]
            misses = [r for r, label in zip(item.rows, item.labels, strict=True) if not label]
            if not hits or not misses:
                continue
            weight = 1 / (len(hits) * len(misses) * len(served) * len(present))
            out += [
                ([a - b for a, b in zip(h, m, strict=True)], weight) for h in hits for m in misses
            ]
    total = sum(weight for _, weight in out) or 1.0
    return [(x, weight / total) for x, weight in out]


def fit_weights(diffs: Pairs, penalty: float) -> list[float]:
    """The weights minimising the pairs' weighted logistic loss plus ``penalty / 2 · |w|²``,
    each on the side ``SIGNS`` says (``signed``)."""
    return signed(lambda held: _newton(diffs, penalty, held), FEATURES, SIGNS)


def signed(fit: Callable[[set[int]], W], names: Sequence[str], signs: dict[str, int]) -> W:
    """``fit(held)``, the features of the indexes in ``held`` held at 0, with every weight on
    the side ``signs`` says: while one of ``names``' weights is on the wrong side, the worst
    such feature is held too and the rest fitted again (shared with the judgment's fit)."""
    held: set[int] = set()
    while True:
        w = fit(held)
        wrong = {
            i: -signs[name] * w[i]
            for i, name in enumerate(names)
            if i not in held and signs.get(name, 0) * w[i] < 0
        }
        if not wrong:
            return w
        held.add(max(wrong, key=lambda i: (wrong[i], -i)))


def _newton(diffs: Pairs, penalty: float, held: set[int]) -> list[float]:
    """The penalised loss's minimum by Newton's method (the loss is convex; the penalty keeps
    the Hessian invertible), the features in ``held`` at 0."""
    d = len(FEATURES)
    w = [0.0] * d
    for _ in range(NEWTON_STEPS):
        grad = [penalty * wi for wi in w]
        hessian = [[penalty if i == j else 0.0 for j in range(d)] for i in range(d)]
        for x, weight in diffs:
            p = _sigmoid(_dot(w, x))
            e, v = -(1 - p) * weight, p * (1 - p) * weight
            for i, xi in enumerate(x):
                if xi:
                    grad[i] += e * xi
                    row, vi = hessian[i], v * xi
                    for j in range(i, d):
                        row[j] += vi * x[j]
        for i in range(d):
            for j in range(i):
                hessian[i][j] = hessian[j][i]
        for i in held:
            grad[i] = 0.0
            for j in range(d):
                hessian[i][j] = hessian[j][i] = float(i == j)
        step = _solve(hessian, grad)
        w = [wi - si for wi, si in zip(w, step, strict=True)]
        if max(map(abs, step)) < 1e-7:
            break
    return w


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """``matrix⁻¹ · vector`` by Gaussian elimination with partial pivoting (``matrix`` is
    symmetric positive definite here)."""
    n = len(vector)
    rows = [[*row, value] for row, value in zip(matrix, vector, strict=True)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(rows[r][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(n):
            if r != col and rows[r][col]:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    return [rows[i][n] / rows[i][i] for i in range(n)]


def ranks(served: list[Served], weights: Sequence[float]) -> tuple[float, float]:
    """Top-1 and MRR of the questions under ``weights`` (a question with no answer-holding
    passage counts as a miss)."""
    return scored_ranks(served, lambda row: _dot(weights, row))


def scored_ranks(
    served: list[Served], score: Callable[[Sequence[float]], float]
) -> tuple[float, float]:
    """Top-1 and MRR of the questions when each passage's feature row scores ``score(row)``."""
    top1 = rr = 0.0
    for item in served:
        scores = [score(row) for row in item.rows]
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        first = next((k for k, i in enumerate(order) if item.labels[i]), None)
        if first is not None:
            top1 += first == 0
            rr += 1 / (first + 1)
    n = max(len(served), 1)
    return top1 / n, rr / n


def fold(item: Served) -> int:
    # By family: a question served twice (``cmrc`` and ``cmrc+asked``) falls in one fold.
    return hashlib.sha256(f"fold:{family(item.set)}:{item.qid}".encode()).digest()[0] % FOLDS


_FOLD_WEIGHTS: dict[tuple[float, int], list[float]] = {}


def fold_weights(fitting: Sets, penalty: float, k: int) -> list[float]:
    """The weights fitted on every fitting question outside fold ``k`` (kept for step 3)."""
    key = (penalty, k)
    if key not in _FOLD_WEIGHTS:
        train = [(name, [s for s in served if fold(s) != k]) for name, served in fitting]
        _FOLD_WEIGHTS[key] = fit_weights(pairs(train), penalty)
    return _FOLD_WEIGHTS[key]


def cross_validate(fitting: Sets, penalty: float) -> dict[str, tuple[float, float]]:
    """Held-out top-1 and MRR per set for ``penalty`` (module docstring, step 2)."""
    held: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in fitting}
    for k in range(FOLDS):
        weights = fold_weights(fitting, penalty, k)
        for name, served in fitting:
            left_out = [s for s in served if fold(s) == k]
            held[name] += [ranks([item], weights) for item in left_out]
    return _means(held)


def _means(held: dict[str, list[tuple[float, float]]]) -> dict[str, tuple[float, float]]:
    return {
        name: (
            sum(t for t, _ in values) / max(len(values), 1),
            sum(r for _, r in values) / max(len(values), 1),
        )
        for name, values in held.items()
    }


def _merit(figures: dict[str, tuple[float, float]]) -> float:
    return sum((t + r) / 2 for t, r in figures.values()) / max(len(figures), 1)


def _shown(figures: dict[str, tuple[float, float]]) -> str:
    return "   ".join(f"{name} top-1 {t:.1%} MRR {r:.3f}" for name, (t, r) in figures.items())


def baselines(fitting: Sets) -> None:
    """Top-1 of today's scorer and of BM25 on the fitting halves (what the ranker must beat)."""
    for name, served in fitting:
        n = max(len(served), 1)
        today = sum(bool(s.today) and s.today[0] for s in served) / n
        bm25 = sum(bool(s.bm25) and s.bm25[0] for s in served) / n
        held = sum(any(s.labels) for s in served) / n
        print(
            f"{name} fitting half: {len(served)} questions, today top-1 {today:.1%}, "
            f"BM25 top-1 {bm25:.1%}, kept evidence holds an answer {held:.1%}"
        )


def choose_penalty(fitting: Sets) -> float:
    baselines(fitting)
    best, chosen = -1.0, PENALTIES[0]
    for penalty in PENALTIES:
        figures = cross_validate(fitting, penalty)
        merit = _merit(figures)
        print(f"λ = {penalty:<5} cross-validated on the fitting halves: {_shown(figures)}")
        if merit > best:
            best, chosen = merit, penalty
    print(f"chosen λ = {chosen}")
    return chosen


# -- step 3: trees -----------------------------------------------------------------------


def _lightgbm() -> Any:
    try:
        import lightgbm
    except ImportError:
        raise SystemExit(
            "the trees need LightGBM: pip install -e '.[fit]' (or pass --learner linear)"
        ) from None
    return lightgbm


def fit_trees(
    served: Sets, weights: Sequence[float], depth: int, leaf: int, rate: float, rounds: int
) -> Any:
    """A LightGBM booster of ``rounds`` LambdaRank trees over ``served``'s questions, started
    from the linear score under ``weights`` (module docstring, step 3)."""
    lightgbm = _lightgbm()
    import numpy as np

    present = [(name, [s for s in items if s.rows]) for name, items in served]
    present = [(name, items) for name, items in present if items]
    rows, labels, groups, start, share = [], [], [], [], []
    for _, items in present:
        for item in items:
            rows += item.rows
            labels += [int(label) for label in item.labels]
            groups.append(len(item.rows))
            start += [_dot(weights, row) for row in item.rows]
            share += [1 / (len(items) * len(present))] * len(item.rows)
    mean = sum(share) / len(share)
    data = lightgbm.Dataset(
        np.array(rows, dtype=np.float64),
        np.array(labels),
        group=groups,
        weight=np.array([w / mean for w in share]),
        init_score=np.array(start),
    )
    params = {
        "objective": "lambdarank",
        "max_depth": depth,
        "num_leaves": 2**depth,
        "min_child_samples": leaf,
        "learning_rate": rate,
        "seed": SEED,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": 1,
        "verbosity": -1,
    }
    return lightgbm.train(params, data, num_boost_round=rounds)


def flat_trees(booster: Any, rounds: int | None = None) -> list[dict[str, list[Any]]]:
    """The booster's first ``rounds`` trees in ``text._ranker``'s flat form (module docstring
    there): nodes numbered in preorder, so children follow their parent."""
    out = []
    for info in booster.dump_model(num_iteration=rounds)["tree_info"]:
        tree: dict[str, list[Any]] = {
            "features": [],
            "thresholds": [],
            "left": [],
            "right": [],
            "leaves": [],
        }

        def walk(node: dict[str, Any], tree: dict[str, list[Any]] = tree) -> int:
            if "leaf_value" in node:
                tree["leaves"].append(float(node["leaf_value"]))
                return ~(len(tree["leaves"]) - 1)
            if node["decision_type"] != "<=":
                raise ValueError(f"a split of kind {node['decision_type']!r}")
            index = len(tree["features"])
            tree["features"].append(int(node["split_feature"]))
            tree["thresholds"].append(float(node["threshold"]))
            tree["left"].append(0)
            tree["right"].append(0)
            tree["left"][index] = walk(node["left_child"])
            tree["right"][index] = walk(node["right_child"])
            return index

        walk(info["tree_structure"])
        out.append(tree)
    return out


def _model(weights: Sequence[float], trees: Sequence[dict[str, list[Any]]]) -> RankerModel:
    """An uncalibrated model of these weights and trees, read as ``text._ranker`` reads them."""
    document = {
        "version": VERSION,
        "features": list(FEATURES),
        "weights": dict(zip(FEATURES, weights, strict=True)),
        "trees": list(trees),
        "calibration": {"scale": 1.0, "bias": 0.0},
        "threshold": 0.0,
    }
    return model_from_json(json.dumps(document))


def model_ranks(served: list[Served], model: RankerModel) -> tuple[float, float]:
    """Top-1 and MRR of the questions under ``model``'s fitted score (as ``ranks``)."""
    return scored_ranks(served, model.score)


def choose_trees(fitting: Sets, penalty: float) -> tuple[int, int, float, int]:
    """(depth, least passages per leaf, learning rate, number of trees) by cross-validation
    on the fitting halves (module docstring, step 3)."""
    held: dict[tuple[int, int, float, int], dict[str, list[tuple[float, float]]]] = {}
    for depth, leaf, rate in TREE_GRID:
        for rounds in TREE_ROUNDS:
            held[depth, leaf, rate, rounds] = {name: [] for name, _ in fitting}
        for k in range(FOLDS):
            weights = fold_weights(fitting, penalty, k)
            train = [(name, [s for s in served if fold(s) != k]) for name, served in fitting]
            booster = fit_trees(train, weights, depth, leaf, rate, max(TREE_ROUNDS))
            for rounds in TREE_ROUNDS:
                model = _model(weights, flat_trees(booster, rounds))
                for name, served in fitting:
                    left_out = [s for s in served if fold(s) == k]
                    held[depth, leaf, rate, rounds][name] += [
                        model_ranks([item], model) for item in left_out
                    ]
    best, chosen = -1.0, (*TREE_GRID[0], TREE_ROUNDS[0])
    for key, values in held.items():
        figures = _means(values)
        depth, leaf, rate, rounds = key
        print(
            f"trees: depth {depth}, ≥ {leaf} per leaf, rate {rate}, {rounds:>3} trees, "
            f"cross-validated: {_shown(figures)}"
        )
        if _merit(figures) > best:
            best, chosen = _merit(figures), key
    print(f"chosen trees: depth {chosen[0]}, ≥ {chosen[1]} per leaf, rate {chosen[2]}, {chosen[3]}")
    return chosen


def checked_trees(
    fitting: Sets, weights: Sequence[float], booster: Any
) -> list[dict[str, list[Any]]]:
    """The booster's trees flat, once ``text._ranker``'s pure-Python evaluation of them gives
    LightGBM's own scores on every fitting passage."""
    import numpy as np

    trees = flat_trees(booster)
    model = _model([0.0] * len(FEATURES), trees)
    rows = [row for _, served in fitting for item in served for row in item.rows]
    theirs = booster.predict(np.array(rows, dtype=np.float64), raw_score=True)
    worst = max((abs(model.score(r) - t) for r, t in zip(rows, theirs, strict=True)), default=0)
    if worst > 1e-9:
        raise SystemExit(f"the flat trees score {worst} away from LightGBM's: not written")
    return trees


def fit_calibration(points: list[tuple[float, bool, float]]) -> tuple[float, float]:
    """Platt scaling on (score, label, weight): logistic regression of the label on the
    standardised score by Newton's method with step halving, the weights rescaled to sum to
    the number of points; returned for the raw score."""
    total = sum(weight for _, _, weight in points) or 1.0
    mean = sum(s * w for s, _, w in points) / total
    spread = math.sqrt(sum(w * (s - mean) ** 2 for s, _, w in points) / total) or 1.0
    data = [((s - mean) / spread, label, w * len(points) / total) for s, label, w in points]

    def loss(a: float, b: float) -> float:
        return sum(
            w * (math.log1p(math.exp(-abs(z))) + max(z, 0) - (z if label else 0))
            for x, label, w in data
            for z in (a * x + b,)
        )

    a, b = 1.0, 0.0
    for _ in range(30):
        ga = gb = haa = hab = hbb = 0.0
        for x, label, w in data:
            p = _sigmoid(a * x + b)
            e, v = (p - label) * w, p * (1 - p) * w
            ga, gb, haa, hab, hbb = ga + e * x, gb + e, haa + v * x * x, hab + v * x, hbb + v
        det = haa * hbb - hab * hab
        if det <= 0:
            break
        da, db = (hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det
        step, before = 1.0, loss(a, b)
        while step > 1e-4 and loss(a - step * da, b - step * db) > before:
            step /= 2
        a, b = a - step * da, b - step * db
    return a / spread, b - a * mean / spread


def pick_threshold(fitting: Sets, model: RankerModel) -> float:
    rows: list[tuple[float, bool, float]] = []  # (best probability, kept holds, weight)
    for _, served in fitting:
        for item in served:
            best = max((model.probability(r) for r in item.rows), default=0.0)
            rows.append((best, any(item.labels), 1 / (len(served) * len(fitting))))
    candidates = sorted({0.0, *(best for best, _, _ in rows)})

    def cost(threshold: float) -> float:
        return sum(
            weight
            for best, holds, weight in rows
            if (best >= threshold and not holds) or (best < threshold and holds)
        )

    return min(candidates, key=lambda t: (cost(t), t))


def document_text(document: dict[str, object]) -> str:
    """The weights file's text: indented, each tree on one line of its own."""
    rest = {key: value for key, value in document.items() if key != "trees"}
    trees = document.get("trees") or []
    assert isinstance(trees, list)
    text = json.dumps(rest, indent=2, ensure_ascii=False)
    lines = ",\n".join("    " + json.dumps(tree, separators=(",", ":")) for tree in trees)
    block = f'  "trees": [\n{lines}\n  ],\n' if trees else '  "trees": [],\n'
    head, tail = text.split('  "calibration"', 1)
    return f'{head}{block}  "calibration"{tail}\n'


def families(sets: Sets) -> Sets:
    """The sets of one family (``ranking.family``) as one set: further DuReader train
    questions weigh as more questions of the DuReader set, not as a set of their own."""
    merged: dict[str, list[Served]] = {}
    for name, served in sets:
        merged.setdefault(family(name), []).extend(served)
    return list(merged.items())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--out", default=str(ROOT / "external_query_service" / "text" / WEIGHTS_FILE)
    )
    parser.add_argument("--learner", choices=("linear", "trees"), default="linear")
    parser.add_argument(
        "--cv-only",
        action="store_true",
        help="print the cross-validation on the fitting halves only: no file, no checking half",
    )
    parser.add_argument(
        "--without",
        default="",
        metavar="FEATURE,...",
        help="features held at 0 (so weighted 0): to judge a feature by cross-validation",
    )
    known, rest = parser.parse_known_args(argv)
    if known.learner == "trees":
        _lightgbm()  # fail before the long steps, not after them
    sets = served_sets(parse(rest))
    if not sets:
        print("no set to fit on; nothing written")
        return 1
    held = [FEATURES.index(name) for name in known.without.split(",") if name]
    for _, served in sets:
        for item in served:
            for row in item.rows:
                for k in held:
                    row[k] = 0.0
    fitting = families(
        [(name, [s for s in served if s.half == "fitting"]) for name, served in sets]
    )
    penalty = choose_penalty(fitting)
    if known.cv_only:
        if known.learner == "trees":
            choose_trees(fitting, penalty)
        return 0
    weights = fit_weights(pairs(fitting), penalty)
    trees: list[dict[str, list[Any]]] = []
    settings: dict[str, object] = {}
    if known.learner == "trees":
        depth, leaf, rate, rounds = choose_trees(fitting, penalty)
        booster = fit_trees(fitting, weights, depth, leaf, rate, rounds)
        trees = checked_trees(fitting, weights, booster)
        settings = {
            "objective": "lambdarank",
            "trees": rounds,
            "depth": depth,
            "min_passages_per_leaf": leaf,
            "learning_rate": rate,
            "seed": SEED,
        }
    fitted = _model(weights, trees)
    points = []
    for _, served in fitting:
        for item in served:
            share = 1 / (max(len(item.rows), 1) * len(served) * len(fitting))
            points += [
                (fitted.score(row), label, share)
                for row, label in zip(item.rows, item.labels, strict=True)
            ]
    scale, bias = fit_calibration(points)
    threshold = pick_threshold(
        fitting, RankerModel(VERSION, fitted.weights, scale, bias, 0.0, fitted.trees)
    )
    document: dict[str, object] = {
        "version": VERSION,
        "features": list(FEATURES),
        # The weights and leaf values exactly as fitted (rounding them would move the
        # calibration off the scores it was fitted on), thresholds exactly as LightGBM split.
        "weights": dict(zip(FEATURES, weights, strict=True)),
        "trees": trees,
        "calibration": {"scale": scale, "bias": bias},
        "threshold": threshold,
        "penalty": penalty,
        "tree_settings": settings,
        "fitted_on": {name: len(served) for name, served in fitting},
        "method": (
            "pairwise logistic regression, L2 penalty by cross-validation on the fitting "
            "halves"
            + (
                ", LambdaRank trees boosted on it (settings by the same cross-validation)"
                if trees
                else ""
            )
            + ", Platt calibration (tools/fit_ranker.py)"
        ),
    }
    text = document_text(document)
    Path(known.out).write_text(text, encoding="utf-8")
    print(f"wrote {known.out}: {len(trees)} trees, {len(text)} bytes")
    model = model_from_json(text)
    for name, served in sets:
        report(name, served, model)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
