"""Fit the passage ranker's weights on the fitting halves of bench/ranking.py; print both halves.

    python tools/fit_ranker.py [--dureader DIR] [--cmrc FILE] [--drcd FILE] [--sample N]
                               [--cache FILE] [--out WEIGHTS_FILE]

A dev-only script (nothing in the package imports it): the sets are found as
``bench/ranking.py`` finds them (``--cache`` as there: what the page chain kept is read back,
only the features are computed again), and only the questions of each set's *fitting* half
are fitted on. Four steps, all deterministic (Newton's method from zero weights, folds by a
hash of the question id: no random draw, so no seed to fix):

1. **Pairwise logistic regression** (RankNet's loss on a linear scorer): for every question,
   every pair of its kept passages where one holds the answer and the other does not, minimise
   ``log(1 + exp(-w · (x_hit - x_miss)))`` plus ``λ/2 · |w|²``. Each question weighs the same
   within its set and each set the same in all, so no set outweighs the others by its size.
2. **λ by cross-validation on the fitting halves**: the fitting questions are cut into
   ``FOLDS`` folds (a hash of the set and question id); for each λ of ``PENALTIES`` the
   weights are fitted on all folds but one and judged on the one left out; the λ with the best
   mean over the sets of the held-out top-1 and MRR wins, and the weights are fitted again on
   every fitting question with it. The checking halves play no part.
3. **Calibration** (Platt scaling): ``p = sigmoid(a · (w · x) + b)`` fitted by logistic
   regression on whether each kept passage holds the answer.
4. **Threshold**: the probability a question's best passage must reach for it to be answered,
   chosen among the questions' best probabilities to minimise the questions answered with the
   answer nowhere in the kept evidence plus those refused although it was there (each set
   weighted the same).

Writes the weights file (``--out``, by default ``text._ranker``'s ``WEIGHTS_FILE`` in the
package) and prints the cross-validation
figures, then ``bench/ranking.py``'s figures for both halves of every set with the new weights.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from ranking import Served, parse, report, served_sets

from external_query_service.text._ranker import FEATURES, WEIGHTS_FILE, RankerModel

ROOT = Path(__file__).resolve().parents[1]

VERSION = 2
PENALTIES = (0.01, 0.03, 0.1, 0.3, 1.0)
FOLDS = 4
NEWTON_STEPS = 30

Sets = list[tuple[str, list[Served]]]
Pairs = list[tuple[list[float], float]]


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
    by Newton's method (the loss is convex; the penalty keeps the Hessian invertible)."""
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
    top1 = rr = 0.0
    for item in served:
        scores = [_dot(weights, row) for row in item.rows]
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        first = next((k for k, i in enumerate(order) if item.labels[i]), None)
        if first is not None:
            top1 += first == 0
            rr += 1 / (first + 1)
    n = max(len(served), 1)
    return top1 / n, rr / n


def fold(item: Served) -> int:
    return hashlib.sha256(f"fold:{item.set}:{item.qid}".encode()).digest()[0] % FOLDS


def cross_validate(fitting: Sets, penalty: float) -> dict[str, tuple[float, float]]:
    """Held-out top-1 and MRR per set for ``penalty`` (module docstring, step 2)."""
    held: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in fitting}
    for k in range(FOLDS):
        train = [(name, [s for s in served if fold(s) != k]) for name, served in fitting]
        weights = fit_weights(pairs(train), penalty)
        for name, served in fitting:
            left_out = [s for s in served if fold(s) == k]
            held[name] += [ranks([item], weights) for item in left_out]
    return {
        name: (
            sum(t for t, _ in values) / max(len(values), 1),
            sum(r for _, r in values) / max(len(values), 1),
        )
        for name, values in held.items()
    }


def choose_penalty(fitting: Sets) -> float:
    best, chosen = -1.0, PENALTIES[0]
    for penalty in PENALTIES:
        figures = cross_validate(fitting, penalty)
        merit = sum((t + r) / 2 for t, r in figures.values()) / max(len(figures), 1)
        shown = "   ".join(f"{name} top-1 {t:.1%} MRR {r:.3f}" for name, (t, r) in figures.items())
        print(f"λ = {penalty:<5} cross-validated on the fitting halves: {shown}")
        if merit > best:
            best, chosen = merit, penalty
    print(f"chosen λ = {chosen}")
    return chosen


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--out", default=str(ROOT / "external_query_service" / "text" / WEIGHTS_FILE)
    )
    known, rest = parser.parse_known_args(argv)
    sets = served_sets(parse(rest))
    if not sets:
        print("no set to fit on; nothing written")
        return 1
    fitting = [(name, [s for s in served if s.half == "fitting"]) for name, served in sets]
    penalty = choose_penalty(fitting)
    weights = fit_weights(pairs(fitting), penalty)
    points = []
    for _, served in fitting:
        for item in served:
            share = 1 / (max(len(item.rows), 1) * len(served) * len(fitting))
            points += [
                (_dot(weights, row), label, share)
                for row, label in zip(item.rows, item.labels, strict=True)
            ]
    scale, bias = fit_calibration(points)
    model = RankerModel(VERSION, tuple(weights), scale, bias, 0.0)
    threshold = pick_threshold(fitting, model)
    document = {
        "version": VERSION,
        "features": list(FEATURES),
        "weights": {name: round(value, 6) for name, value in zip(FEATURES, weights, strict=True)},
        "calibration": {"scale": round(scale, 6), "bias": round(bias, 6)},
        "threshold": round(threshold, 6),
        "penalty": penalty,
        "fitted_on": {name: len(served) for name, served in fitting},
        "method": (
            "pairwise logistic regression, L2 penalty by cross-validation on the fitting "
            "halves, Platt calibration (tools/fit_ranker.py)"
        ),
    }
    Path(known.out).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {known.out}")
    rounded = RankerModel(
        VERSION,
        tuple(document["weights"][name] for name in FEATURES),
        document["calibration"]["scale"],
        document["calibration"]["bias"],
        document["threshold"],
    )
    for name, served in sets:
        report(name, served, rounded)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
