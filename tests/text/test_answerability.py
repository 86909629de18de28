"""The answerability judgment: its packaged weights and the features it reads."""

from __future__ import annotations

import dataclasses
import json
import math
from importlib.resources import files

import pytest

from external_query_service.text import _answerability as answerability_module
from external_query_service.text._answerability import (
    ANSWERABILITY_FILE,
    FEATURES,
    SEMANTIC_FILE,
    answerability_features,
    load_answerability,
    model_from_json,
)
from external_query_service.text._ranker import RankerPassage
from external_query_service.text._rerank import Candidate, rerank
from external_query_service.text._score import term_stats
from external_query_service.text._tokens import terms

QUESTION = "湛江港今年货物吞吐量是多少？"
ANSWER = "湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八，集装箱航线继续增加。"
ASIDE = "湛江港位于广东西南部，是天然深水良港，港区风景优美，吸引了很多游客前来参观。"


def stats_of(*texts: str) -> object:
    return term_stats(terms(text) for text in texts)


def column(name: str, rows: list[list[float]]) -> list[float]:
    return [row[FEATURES.index(name)] for row in rows]


def test_the_packaged_judgment_is_versioned_and_names_its_features() -> None:
    model = load_answerability()
    document = json.loads(
        files(answerability_module.__package__).joinpath(ANSWERABILITY_FILE).read_text("utf-8")
    )
    assert model.version == document["version"] >= 1
    assert tuple(document["features"]) == FEATURES
    assert len(model.weights) == len(FEATURES)
    assert 0 < model.threshold < 1


@pytest.mark.parametrize("name", [ANSWERABILITY_FILE, SEMANTIC_FILE])
def test_weights_for_other_features_are_refused(name: str) -> None:
    document = json.loads(files(answerability_module.__package__).joinpath(name).read_text("utf-8"))
    document["features"] = [*document["features"], "page_position"]
    with pytest.raises(ValueError, match="other features"):
        model_from_json(json.dumps(document))


def _packaged() -> dict[str, object]:
    text = files(answerability_module.__package__).joinpath(ANSWERABILITY_FILE).read_text("utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def test_trees_in_a_judgment_file_add_their_leaf_to_the_linear_margin() -> None:
    # One split on ``alignment``: passages aligning above 0.5 gain 2 in log-odds.
    document = _packaged()
    linear = model_from_json(json.dumps({**document, "trees": []}))
    tree = {
        "features": [FEATURES.index("alignment")],
        "thresholds": [0.5],
        "left": [-1],
        "right": [-2],
        "leaves": [0.0, 2.0],
    }
    boosted = model_from_json(json.dumps({**document, "trees": [tree]}))
    stats = stats_of(ANSWER, ASIDE)
    rows = answerability_features(QUESTION, [RankerPassage(ANSWER), RankerPassage(ASIDE)], stats)  # type: ignore[arg-type]
    for row in rows:
        gain = 2.0 if row[FEATURES.index("alignment")] > 0.5 else 0.0
        odds = boosted.probability(row) / (1 - boosted.probability(row))
        base = linear.probability(row) / (1 - linear.probability(row))
        assert odds == pytest.approx(base * math.exp(gain))
    assert load_answerability().trees == ()


@pytest.mark.parametrize(
    "tree",
    [
        {"features": [99], "thresholds": [0.5], "left": [-1], "right": [-2], "leaves": [0, 1]},
        {"features": [0], "thresholds": [0.5], "left": [0], "right": [-2], "leaves": [0, 1]},
        {"features": [0], "thresholds": [], "left": [-1], "right": [-2], "leaves": [0, 1]},
    ],
    ids=["feature-out-of-range", "child-loops-back", "lists-of-other-lengths"],
)
def test_a_malformed_tree_is_refused(tree: dict[str, list[float]]) -> None:
    with pytest.raises(ValueError, match="malformed"):
        model_from_json(json.dumps({**_packaged(), "trees": [tree]}))


def test_features_never_read_where_the_engine_listed_the_page() -> None:
    stats = stats_of(ANSWER, ASIDE)
    first = answerability_features(QUESTION, [RankerPassage(ANSWER, page=0)], stats)  # type: ignore[arg-type]
    fifth = answerability_features(QUESTION, [RankerPassage(ANSWER, page=4)], stats)  # type: ignore[arg-type]
    assert first == fifth
    assert "page_position" not in FEATURES


def test_features_lie_between_zero_and_one() -> None:
    stats = stats_of(ANSWER, ASIDE)
    rows = answerability_features(QUESTION, [RankerPassage(ANSWER), RankerPassage(ASIDE)], stats)  # type: ignore[arg-type]
    assert all(0.0 <= value <= 1.0 for row in rows for value in row)


def test_a_name_the_segmenter_cuts_apart_still_counts_by_its_characters() -> None:
    # One run in the question, three words on the page: no term of the question matches the
    # page's name of the yacht, its character bigrams do.
    question = "BX700Pro型游艇的最大航速是多少节？"
    spaced = "BX 700 Pro 型游艇的最大航速为38节。"
    other = "今年新开的展厅展出多款家用游艇和帆船。"
    assert "bx700pro" in terms(question)
    assert "bx700pro" not in terms(spaced)
    rows = answerability_features(
        question,
        [RankerPassage(spaced), RankerPassage(other)],
        stats_of(spaced, other),  # type: ignore[arg-type]
    )
    spaced_grams, other_grams = column("gram_coverage", rows)
    assert spaced_grams > 0.3
    assert spaced_grams > 2 * other_grams


def test_a_passage_copied_on_several_pages_reads_as_when_given_once() -> None:
    # The same report on five sites: its bigrams are as rare among the question's distinct
    # passages as when it is given once.
    passage = RankerPassage(ANSWER)
    aside = RankerPassage(ASIDE)
    stats = stats_of(ANSWER, ASIDE)
    once = answerability_features(QUESTION, [passage, aside], stats)
    copied = answerability_features(QUESTION, [passage] * 4 + [aside], stats)
    assert copied[0] == once[0]
    assert copied[-1] == once[-1]
    assert all(row == copied[0] for row in copied[:4])
    # A copy with a byline of its own is a copy too: the bigrams weigh as they did.
    bylined = RankerPassage("湛江日报讯 " + ANSWER)
    with_byline = answerability_features(QUESTION, [passage, bylined, bylined, aside], stats)
    gram = FEATURES.index("gram_coverage")
    assert with_byline[0][gram] == once[0][gram]
    assert with_byline[-1][gram] == once[-1][gram]


def test_the_terms_a_passage_misses_are_counted() -> None:
    rows = answerability_features(
        QUESTION,
        [RankerPassage(ANSWER), RankerPassage(ASIDE)],
        stats_of(ANSWER, ASIDE),  # type: ignore[arg-type]
    )
    held = column("terms_held", rows)
    assert held[0] > held[1]
    assert column("terms_missing", rows)[0] < column("terms_missing", rows)[1]


def test_the_judgment_not_the_ranker_decides_which_passages_answer() -> None:
    stats = stats_of(ANSWER, ASIDE)
    passages = [Candidate(ANSWER, QUESTION), Candidate(ASIDE, QUESTION)]
    judge = load_answerability()
    strict = dataclasses.replace(judge, threshold=0.9999)
    lenient = dataclasses.replace(judge, threshold=0.0)
    assert not any(item.reaches for item in rerank(passages, stats, judge=strict))  # type: ignore[arg-type]
    # Only the passage ranked first is judged: the decision reads no other.
    assert [item.reaches for item in rerank(passages, stats, judge=lenient)] == [True, False]  # type: ignore[arg-type]


def test_a_comparison_passage_is_judged_against_its_own_part() -> None:
    question = "比亚迪和特斯拉11月销量对比"
    byd = "比亚迪公布11月新能源汽车销量为50.6万辆，同比增长百分之十二，海外销量创新高。"
    tesla = "特斯拉中国11月销量约为8.2万辆，其中出口约2.1万辆，Model Y仍是主力车型。"
    stats = stats_of(byd, tesla)
    passages = [Candidate(byd, question), Candidate(tesla, question)]
    whole = rerank(passages, stats)  # type: ignore[arg-type]
    parts = rerank(passages, stats, parts=("比亚迪", "特斯拉"))  # type: ignore[arg-type]
    score_whole = {item.index: item for item in whole}
    score_parts = {item.index: item for item in parts}
    # Each passage names one company and misses the other: judged against its own part, it
    # misses nothing of it (the passage ranked first is the one judged: each in turn).
    for text in (byd, tesla):
        alone = rerank([Candidate(text, question)], stats, parts=("比亚迪", "特斯拉"))  # type: ignore[arg-type]
        assert alone[0].reaches
    assert score_parts[parts[0].index].reaches
    assert [score_whole[i].score for i in (0, 1)] == [score_parts[i].score for i in (0, 1)]


def test_a_passage_answering_one_sentence_of_a_question_in_sentences_answers_its_part() -> None:
    question = "蓝湾大桥的主跨长度是多少米？滨海新区的常住人口有多少？"
    parts = ("蓝湾大桥的主跨长度是多少米？", "滨海新区的常住人口有多少？")
    span = "设计资料显示，蓝湾大桥是一座双塔斜拉桥，主跨长度为680米，桥面宽33米。"
    people = "统计公报显示，滨海新区去年末常住人口为126万人，比上年增加三万人。"
    aside = "滨海新区还规划建设第二座跨海大桥，预计明年开工建设。"
    stats = stats_of(span, people, aside)

    def answers(text: str, parts: tuple[str, ...] = ()) -> bool:
        # The passage ranked first is the one judged: each in turn, over the same stats.
        return rerank([Candidate(text, question)], stats, parts=parts)[0].reaches  # type: ignore[arg-type]

    # Judged against the whole question, the population misses the bridge's terms; against
    # its own sentence it answers. The aside answers neither.
    assert not answers(people)
    assert not answers(aside)
    assert [answers(text, parts) for text in (span, people, aside)] == [True, True, False]


def test_a_restated_question_does_not_align_as_an_answer_does() -> None:
    question = "庆大霉素是哪一年被发现的？"
    answer = "庆大霉素于1963年被美国先灵公司的科学家发现，是一种氨基糖苷类抗生素。"
    echo = "网友提问：庆大霉素是哪一年被发现的？我上网查了半天也没有找到答案，有没有人知道？"
    rows = answerability_features(
        question,
        [RankerPassage(answer), RankerPassage(echo)],
        stats_of(answer, echo),  # type: ignore[arg-type]
    )
    # The answer states the question's words in its order, the year in place of the question
    # word; the restatement is left out of the alignment, and nothing else of it aligns.
    stated, restated = column("alignment", rows)
    assert stated > 0.4 > restated
    judge = load_answerability()
    assert judge.probability(rows[0]) > judge.probability(rows[1])


def test_features_never_read_how_a_passage_agrees_with_its_neighbours() -> None:
    # Reading sets ask a question's answering paragraph alone and its other paragraphs with
    # their article's: agreement would learn that shape, not what answers.
    assert "agreement" not in FEATURES
    assert not any(name.endswith("_best") for name in FEATURES)


def test_passages_about_another_subject_that_share_the_asked_words_are_declined() -> None:
    # Asked for one fish's depth, the passages are all about another fish; one of them gives
    # that fish's depth. The subject named nowhere, nothing answers.
    question = "浪花鱼生活区域的水深是多少？"
    texts = [
        "日本绿鹦嘴鱼分布于太平洋区，包括台湾、日本、菲律宾等海域，生活在水深3至30公尺的珊瑚礁区。",
        "本鱼体延长而略侧扁，头部轮廓呈平滑的弧型，齿板之外表面平滑。",
        "雌鱼体为深红棕色，唯尾鳍为较淡的棕红色，胸鳍稍黄。",
    ]
    passages = [Candidate(text, question) for text in texts]
    assert not any(item.reaches for item in rerank(passages, stats_of(*texts)))  # type: ignore[arg-type]
    answered = [*texts, "浪花鱼生活在近岸浅海，栖息区域的水深一般为5至40米。"]
    ranked = rerank([Candidate(text, question) for text in answered], stats_of(*answered))  # type: ignore[arg-type]
    assert [item.index for item in ranked if item.reaches] == [3]
