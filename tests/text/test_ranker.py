"""The fitted ranker: its packaged weights, its features, and the threshold that refuses."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone
from importlib.resources import files
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.testing import World, article, hit
from external_query_service.text import _ranker as ranker_module
from external_query_service.text._ranker import (
    FEATURES,
    PROXIMITY_CHARS,
    WEIGHTS_FILE,
    RankerPassage,
    Tree,
    features,
    load_model,
    model_from_json,
    rank_probabilities,
)
from external_query_service.text._rerank import Candidate, rerank
from external_query_service.text._score import term_stats
from external_query_service.text._tokens import terms

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=timezone(timedelta(hours=8)))
QUESTION = "湛江港今年货物吞吐量是多少？"
ANSWER = "湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八，集装箱航线继续增加。"
ASIDE = "湛江港位于广东西南部，是天然深水良港，港区风景优美，吸引了很多游客前来参观。"


def stats_of(*texts: str) -> object:
    return term_stats(terms(text) for text in texts)


def test_the_packaged_model_is_versioned_small_and_calibrated() -> None:
    model = load_model()
    assert model.version == 4
    assert len(model.weights) == len(FEATURES)
    assert 0 < model.threshold < 1
    assert model.scale > 0  # a higher fitted score is a higher probability
    # Trees on top of the linear part, if any, few and shallow: the ranker runs on every kept
    # passage in the service process.
    assert len(model.trees) <= 200
    assert all(depth(tree) <= 4 for tree in model.trees)


def test_restating_navigation_and_title_lines_never_count_for_a_passage_nor_its_title_against() -> (
    None
):
    # Fitted with pages that only ask (no navigation, the question for a title), an unchecked
    # fit let a passage's share of navigation lines count for it and a title naming the
    # question's words against it; the fit holds these on the side their meaning settles.
    weights = dict(zip(FEATURES, load_model().weights, strict=True))
    assert weights["question_share"] < 0
    assert weights["link_share"] <= 0
    assert weights["title_lines"] <= 0
    assert weights["title"] >= 0


def depth(tree: Tree, node: int = 0) -> int:
    if not tree.features or node < 0:
        return 0
    return 1 + max(depth(tree, tree.left[node]), depth(tree, tree.right[node]))


def test_the_packaged_file_reads_the_same_model_every_time() -> None:
    text = (files(ranker_module.__package__) / WEIGHTS_FILE).read_text("utf-8")
    assert model_from_json(text) == model_from_json(text) == load_model()
    stats = stats_of(ANSWER, ASIDE, "今天天气很好。")
    passages = [RankerPassage(ANSWER, "港口生产快报", 1, 0), RankerPassage(ASIDE, "湛江港", 0, 400)]
    once = rank_probabilities(QUESTION, passages, stats)  # type: ignore[arg-type]
    again = rank_probabilities(QUESTION, passages, stats, model_from_json(text))  # type: ignore[arg-type]
    assert once == again


def document(**changes: object) -> str:
    """A model file: linear weights ``coverage 2`` and ``bm25 -1``, and two trees."""
    weights = dict.fromkeys(FEATURES, 0.0) | {"coverage": 2.0, "bm25": -1.0}
    page, agreement = FEATURES.index("page_position"), FEATURES.index("agreement")
    trees = [
        # page_position <= 0.5 ? -1 : (agreement <= 0.25 ? 0.5 : 2)
        {
            "features": [page, agreement],
            "thresholds": [0.5, 0.25],
            "left": [-1, -2],
            "right": [1, -3],
            "leaves": [-1.0, 0.5, 2.0],
        },
        {"features": [], "thresholds": [], "left": [], "right": [], "leaves": [0.25]},
    ]
    body = {
        "version": 3,
        "features": list(FEATURES),
        "weights": weights,
        "trees": trees,
        "calibration": {"scale": 1.0, "bias": 0.0},
        "threshold": 0.5,
    }
    return json.dumps(body | changes)


def row(**values: float) -> list[float]:
    return [values.get(name, 0.0) for name in FEATURES]


def test_a_hand_made_tree_model_gives_the_scores_expected() -> None:
    model = model_from_json(document())
    # linear part + first tree + the one-leaf tree
    assert model.score(row(coverage=0.5, page_position=1.0, agreement=0.75)) == 1 + 2 + 0.25
    assert model.score(row(coverage=0.5, page_position=1.0, agreement=0.125)) == 1 + 0.5 + 0.25
    assert model.score(row(bm25=0.5, page_position=0.25, agreement=1.0)) == -0.5 - 1 + 0.25
    # A value equal to a threshold goes left, as LightGBM sends it.
    assert model.score(row(page_position=0.5, agreement=1.0)) == -1 + 0.25
    assert model.score(row(page_position=1.0, agreement=0.25)) == 0.5 + 0.25
    assert model.probability(row(page_position=0.5, agreement=1.0, coverage=0.375)) == 0.5


def test_a_linear_model_file_without_trees_still_reads() -> None:
    linear = json.loads(document())
    del linear["trees"]
    model = model_from_json(json.dumps(linear))
    assert model.trees == ()
    assert model.score(row(coverage=0.5, bm25=0.25, page_position=1.0)) == 0.75


@pytest.mark.parametrize(
    "tree",
    [
        {
            "features": [len(FEATURES)],
            "thresholds": [0.5],
            "left": [-1],
            "right": [-2],
            "leaves": [0, 1],
        },
        {"features": [0], "thresholds": [0.5], "left": [0], "right": [-2], "leaves": [0, 1]},
        {"features": [0], "thresholds": [0.5], "left": [-1], "right": [-3], "leaves": [0, 1]},
        {"features": [0], "thresholds": [], "left": [-1], "right": [-2], "leaves": [0, 1]},
        {"features": [], "thresholds": [], "left": [], "right": [], "leaves": []},
    ],
    ids=["feature", "cycle", "leaf", "threshold", "empty"],
)
def test_malformed_trees_are_refused(tree: dict[str, list[float]]) -> None:
    with pytest.raises(ValueError, match="tree"):
        model_from_json(document(trees=[tree]))


def test_weights_for_other_features_are_refused() -> None:
    document = {
        "version": 1,
        "features": ["coverage"],
        "weights": {"coverage": 1.0},
        "calibration": {"scale": 1.0, "bias": 0.0},
        "threshold": 0.5,
    }
    with pytest.raises(ValueError, match="features"):
        model_from_json(json.dumps(document))


def test_features_lie_between_zero_and_one_and_are_deterministic() -> None:
    stats = stats_of(ANSWER, ASIDE, "今天天气很好。")
    passages = [RankerPassage(ANSWER, "港口生产快报", 1, 0), RankerPassage(ASIDE, "湛江港", 0, 400)]
    rows = features(QUESTION, passages, stats)  # type: ignore[arg-type]
    assert all(0 <= value <= 1 for row in rows for value in row)
    assert rows == features(QUESTION, passages, stats)  # type: ignore[arg-type]
    probabilities = rank_probabilities(QUESTION, passages, stats)  # type: ignore[arg-type]
    assert probabilities[0] > probabilities[1]  # the answer, though on the second page


def column(name: str, rows: list[list[float]]) -> list[float]:
    return [row[FEATURES.index(name)] for row in rows]


def test_best_features_compare_a_passage_with_the_others_of_its_question() -> None:
    stats = stats_of(ANSWER, ASIDE, "今天天气很好。")
    passages = [RankerPassage(ANSWER, page=0), RankerPassage(ASIDE, page=1)]
    rows = features(QUESTION, passages, stats)  # type: ignore[arg-type]
    for name in ("coverage", "bm25"):
        raw, best = column(name, rows), column(f"{name}_best", rows)
        assert max(best) == 1.0
        assert best == [value / max(raw) for value in raw]


def test_agreement_is_what_other_pages_say_too() -> None:
    echo = "今年前十个月湛江港货物吞吐量2.6亿吨，同比增长百分之八。"
    passages = [
        RankerPassage(ANSWER, page=0),
        RankerPassage(ASIDE, page=1),
        RankerPassage(echo, page=2),
    ]
    rows = features(QUESTION, passages, stats_of(ANSWER, ASIDE, echo))  # type: ignore[arg-type]
    agreement = column("agreement", rows)
    assert agreement[0] > agreement[1]  # the answer is told again on page 2; the aside is not
    assert column("agreement_best", rows)[0] == 1.0


def test_a_passage_that_is_its_pages_title_tells_nothing() -> None:
    title = "湛江港货物吞吐量_百度知道"
    passages = [RankerPassage(title, title), RankerPassage(f"{title}\n{ANSWER}", title)]
    rows = features(QUESTION, passages, stats_of(title, ANSWER))  # type: ignore[arg-type]
    assert column("title_lines", rows)[0] == 1.0
    assert column("told_length", rows) == [0.0, len(ANSWER) / 360]
    assert 0 < column("title_lines", rows)[1] < 1


def test_scores_are_the_calibrated_probability_in_basis_points() -> None:
    stats = stats_of(ANSWER, ASIDE)
    ranked = rerank([Candidate(ASIDE, QUESTION), Candidate(ANSWER, QUESTION)], stats)  # type: ignore[arg-type]
    assert [item.index for item in ranked] == [1, 0]
    expected = rank_probabilities(QUESTION, [RankerPassage(ANSWER), RankerPassage(ASIDE)], stats)  # type: ignore[arg-type]
    assert [item.score for item in ranked] == [round(10000 * p) for p in expected]


def test_unjudged_passages_reach_by_the_rankers_own_threshold() -> None:
    stats = stats_of(ANSWER, ASIDE)
    passages = [Candidate(ANSWER, QUESTION), Candidate(ASIDE, QUESTION)]
    model = load_model()
    strict = dataclasses.replace(model, threshold=0.9999)
    lenient = dataclasses.replace(model, threshold=0.0)
    assert not any(
        item.reaches
        for item in rerank(passages, stats, judged=False, model=strict)  # type: ignore[arg-type]
    )
    assert all(
        item.reaches
        for item in rerank(passages, stats, judged=False, model=lenient)  # type: ignore[arg-type]
    )


# -- end to end: nothing that answers is said so -------------------------------------------


def test_quotes_that_do_not_answer_are_no_evidence(world: World) -> None:
    # Far down the results, one page mentions the port in passing; nothing answers.
    question = "湛江港今年货物吞吐量是多少？"
    filler = ["今天的天气晴朗，适合出门散步。", "本市图书馆周末照常开放，欢迎市民借阅图书。"]
    urls = [
        world.page(f"site{n}.test", "/a", article(f"本地生活{n}", filler, published="2026-11-29"))
        for n in range(4)
    ]
    urls.append(
        world.page(
            "far.test",
            "/a",
            article("旅游攻略", [ASIDE, *filler], published="2026-11-29", site_name="旅游网"),
        )
    )
    world.results(question, [hit(url, "结果", "摘要") for url in urls])
    settings = world.settings(world.searxng(), network={"max_pages": 5})
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        answer = service.answer(question)
    assert (answer.status, answer.reason) == ("insufficient_evidence", "no_matching_evidence")
    assert answer.evidence == ()


# --- proximity: the sliding window is the window gathered hit by hit ----------------------

_PROXIMITY_WORDS = ["北京", "天气", "明天", "温度", "多少", "港口", "吞吐量", "增长"]


def _proximity_by_hand(collection: Any, folded: str) -> float:
    # Every hit's window gathered from the sorted hits after it, as the feature is defined.
    hits = sorted(
        (start, term)
        for term in collection.terms
        if collection.idf[term]
        for start in range(len(folded))
        if folded.startswith(term, start)
    )
    if not hits or not collection.total:
        return 0.0
    best = 0.0
    for index, (start, _) in enumerate(hits):
        inside = {t for p, t in hits[index:] if p < start + PROXIMITY_CHARS}
        best = max(best, sum(collection.idf[t] for t in collection.terms if t in inside))
    return best / collection.total  # type: ignore[no-any-return]


@given(
    st.lists(st.sampled_from([*_PROXIMITY_WORDS, "，", "的", "是", "。", "x" * 50]), max_size=60),
    st.sampled_from(["北京明天天气温度多少", "港口吞吐量增长多少", "天气"]),
)
# Two windows apart: only the better one counts, not both.
@example(["北京", "x" * 50, "x" * 50, "天气", "温度"], "北京明天天气温度多少")
def test_proximity_is_the_best_window_of_query_weight(words: list[str], query: str) -> None:
    stats = term_stats([_PROXIMITY_WORDS[i : i + 3] for i in range(len(_PROXIMITY_WORDS))])
    collection = ranker_module._Collection(query, stats)
    folded = "".join(words)
    assert collection.proximity(folded) == _proximity_by_hand(collection, folded)
