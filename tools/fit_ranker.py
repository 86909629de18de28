"""Fit the passage ranker's weights on the fitting halves of bench/ranking.py; print both halves.

    python tools/fit_ranker.py [--dureader DIR] [--cmrc FILE] [--drcd FILE] [--sample N]
                               [--out external_query_service/text/ranker_weights.json]

A dev-only script (nothing in the package imports it): the sets are found as
``bench/ranking.py`` finds them, served through the same page chain, and only the questions of
each set's *fitting* half are fitted on. Three steps, all deterministic (full-batch gradient
descent from zero weights: no random draw, so no seed to fix):

1. **Pairwise logistic regression** (RankNet's loss on a linear scorer): for every question,
   every pair of its kept passages where one holds the answer and the other does not, minimise
   ``log(1 + exp(-w · (x_hit - x_miss)))`` plus an L2 penalty. Each question weighs the same
   within its set and each set the same in all, so no set outweighs the others by its size.
2. **Calibration** (Platt scaling): ``p = sigmoid(a · (w · x) + b)`` fitted by logistic
   regression on whether each kept passage holds the answer.
3. **Threshold**: the probability a question's best passage must reach for it to be answered,
   chosen among the questions' best probabilities to minimise the questions answered with the
   answer nowhere in the kept evidence plus those refused although it was there (each set
   weighted the same).

Writes the weights file (``text.ranker``'s ``WEIGHTS_FILE``) and prints ``bench/ranking.py``'s
figures for both halves of every set with the new weights.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from ranking import Served, parse, report, served_sets

from external_query_service.text.ranker import FEATURES, WEIGHTS_FILE, RankerModel

ROOT = Path(__file__).resolve().parents[1]

VERSION = 1
L2 = 1e-3
STEPS = 600
RATE = 2.0


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def _dot(w: Sequence[float], x: Sequence[float]) -> float:
    return sum(a * b for a, b in zip(w, x, strict=True))


def pairs(sets: list[tuple[str, list[Served]]]) -> list[tuple[list[float], float]]:
    """(x_hit - x_miss, weight) for every pair of every fitting question."""
    out: list[tuple[list[float], float]] = []
    for _, served in sets:
        fitting = [s for s in served if s.half == "fitting"]
        for item in fitting:
            hits = [r for r, label in zip(item.rows, item.labels, strict=True) if label]
            misses = [r for r, label in zip(item.rows, item.labels, strict=True) if not label]
            if not hits or not misses:
                continue
            weight = 1 / (len(hits) * len(misses) * len(fitting) * len(sets))
            out += [
                ([a - b for a, b in zip(h, m, strict=True)], weight) for h in hits for m in misses
            ]
    return out


def fit_weights(diffs: list[tuple[list[float], float]]) -> list[float]:
    w = [0.0] * len(FEATURES)
    total = sum(weight for _, weight in diffs) or 1.0
    for _ in range(STEPS):
        grad = [L2 * wi for wi in w]
        for x, weight in diffs:
            g = -(1 - _sigmoid(_dot(w, x))) * weight / total
            for k, xk in enumerate(x):
                grad[k] += g * xk
        w = [wi - RATE * gi for wi, gi in zip(w, grad, strict=True)]
    return w


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


def pick_threshold(sets: list[tuple[str, list[Served]]], model: RankerModel) -> float:
    rows: list[tuple[float, bool, float]] = []  # (best probability, kept holds, weight)
    for _, served in sets:
        fitting = [s for s in served if s.half == "fitting"]
        for item in fitting:
            best = max((model.probability(r) for r in item.rows), default=0.0)
            rows.append((best, any(item.labels), 1 / (len(fitting) * len(sets))))
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
    parser.add_argument("--cache", help="pickle of the served sets: read if present, else written")
    known, rest = parser.parse_known_args(argv)
    cache = Path(known.cache) if known.cache else None
    if cache is not None and cache.is_file():
        sets = pickle.loads(cache.read_bytes())
    else:
        sets = served_sets(parse(rest))
        if cache is not None:
            cache.write_bytes(pickle.dumps(sets))
    if not sets:
        print("no set to fit on; nothing written")
        return 1
    weights = fit_weights(pairs(sets))
    points = []
    for _, served in sets:
        fitting = [s for s in served if s.half == "fitting"]
        for item in fitting:
            share = 1 / (max(len(item.rows), 1) * len(fitting) * len(sets))
            points += [
                (_dot(weights, row), label, share)
                for row, label in zip(item.rows, item.labels, strict=True)
            ]
    scale, bias = fit_calibration(points)
    model = RankerModel(VERSION, tuple(weights), scale, bias, 0.0)
    threshold = pick_threshold(sets, model)
    model = RankerModel(VERSION, tuple(weights), scale, bias, threshold)
    document = {
        "version": VERSION,
        "features": list(FEATURES),
        "weights": {name: round(value, 6) for name, value in zip(FEATURES, weights, strict=True)},
        "calibration": {"scale": round(scale, 6), "bias": round(bias, 6)},
        "threshold": round(threshold, 6),
        "fitted_on": {name: sum(s.half == "fitting" for s in served) for name, served in sets},
        "method": "pairwise logistic regression, Platt calibration (tools/fit_ranker.py)",
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
