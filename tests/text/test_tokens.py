"""Index terms: Chinese words from rjieba, English stems from Snowball, mixed text by script."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from external_query_service.text._echo import fold, fold_all
from external_query_service.text._tokens import (
    SEPARATOR,
    query_terms,
    term_counts,
    term_counts_all,
    terms,
)


def test_chinese_text_is_cut_into_dictionary_words() -> None:
    assert Counter(terms("成都二手房交易流程")) >= Counter(["成都", "二手房", "交易", "流程"])


def test_a_long_chinese_word_also_yields_the_words_inside_it() -> None:
    # Search mode: a question's 大结局 still meets a page's 结局.
    assert {"大结局", "结局"} <= set(terms("兰陵王妃大结局"))
    assert "结局" in terms("这本书的结局是")


def test_english_words_are_case_folded_and_stemmed() -> None:
    assert terms("Released, releases; RELEASE!") == ["releas"] * 3
    assert set(terms("Kettles descale")) == set(terms("kettle descales"))


def test_mixed_text_is_cut_where_the_script_changes() -> None:
    assert Counter(terms("小米6防水等级")) == Counter(["小米", "6", "防水", "等级"])
    assert Counter(terms("Rust 1.80版本发布")) == Counter(["rust", "1", "80", "版本", "发布"])


def test_fullwidth_forms_fold_to_their_ascii_terms() -> None:
    assert terms("ＩＢＭ　Ｓｈａｒｅｓ") == terms("IBM shares")


def test_punctuation_and_whitespace_are_never_terms() -> None:
    assert terms("。，、！？ -- ... \n\t「」") == []
    assert terms("") == []


def test_a_question_drops_its_chinese_function_words() -> None:
    kept = query_terms("2017有什么好看的小说")
    assert {"好看", "小说", "2017"} <= set(kept)
    assert not {"什么", "的"} & set(kept)
    assert not {"跟", "吗"} & set(query_terms("比熊跟泰迪能配吗"))


def test_a_question_drops_its_degree_interrogatives_which_jieba_tags_as_content() -> None:
    # 多高 ("how tall") is an adjective to jieba and 多久 a numeral: the answer holds a measure.
    assert query_terms("范冰冰多高") == ["冰冰", "范冰冰"]
    assert "多久" not in query_terms("办护照要多久")
    assert "多长时间" in query_terms("多长时间能到")  # a longer word keeps its own term


def test_a_question_drops_its_english_function_words_but_keeps_content_and_numbers() -> None:
    assert query_terms("When was Rust 1.80 released?") == ["rust", "1", "80", "releas"]
    assert query_terms("What is the capital of France?") == ["capit", "franc"]


def test_a_kept_question_cut_is_a_fresh_list_each_time() -> None:
    first = query_terms("湛江明天天气怎么样")
    first.append("mutated")
    assert query_terms("湛江明天天气怎么样") == ["湛江", "明天", "天气"]
    # A question too long to keep is cut the same way.
    long_question = "湛江明天天气怎么样" + "，" * 2_000
    assert query_terms(long_question) == ["湛江", "明天", "天气"]


def test_query_terms_match_the_terms_of_a_page_saying_the_same() -> None:
    page = set(terms("湛江港今年前十个月货物吞吐量达到2.6亿吨"))
    assert set(query_terms("湛江港今年货物吞吐量是多少？")) - page <= {"是", "多少"}


def test_traditional_and_simplified_text_give_the_same_terms() -> None:
    # One script to the index: a traditional page answers a simplified question and back.
    assert Counter(terms("臺灣的經濟發展很快")) == Counter(terms("台湾的经济发展很快"))
    assert set(query_terms("臺灣經濟怎麼樣")) == set(query_terms("台湾经济怎么样"))
    assert {"台湾", "经济"} <= set(terms("臺灣經濟"))


def test_term_counts_are_the_terms_counted_in_their_order() -> None:
    for text in (
        "湛江明天多云，气温 23 到 28 摄氏度。東南風三級，Released releases",
        "口腔溃疡 大结局 兰陵王妃大结局",
        "Only English words here, released and RELEASE",
        "。，、！？ -- ... \n\t「」",
        "",
    ):
        counts = term_counts(text)
        assert counts == Counter(terms(text))
        assert list(counts) == list(Counter(terms(text)))
        assert " " not in counts


# Traditional phrases and characters (OpenCC rewrites some as characters beyond the BMP),
# compatibility ideographs, full-width letters and digits, characters beyond the BMP, Latin
# with and without case, digits and punctuation.
_MIXED = st.lists(
    st.sampled_from(
        [
            *("憑藉", "深沈", "二噁英", "遱", "鄟", "東南風", "臺灣", "乾隆", "乾燥", "著名"),
            *("\uf900", "\ufa0e", "ＡＢＣ", "１２", "𠮶", "𫐷", "ǅ", "ß", "İ", "Straße"),
            *("湛江", "明天", "多云", "Released", "IBM", "3.5", "，", "。", " ", "\n", "-"),
        ]
    ),
    max_size=16,
).map("".join)


@given(_MIXED)
def test_term_counts_read_off_the_fold_are_the_same(text: str) -> None:
    counts = term_counts(text, fold(text))
    assert counts == term_counts(text)
    assert list(counts) == list(term_counts(text))


# Texts as a page's chunks come: mostly the mix above, now and then one holding the separator
# (which no normalized text does) or any character at all.
_CHUNKS = st.lists(
    st.one_of(_MIXED, _MIXED.map(lambda text: text + SEPARATOR), st.text(max_size=8)),
    max_size=8,
)


@given(_CHUNKS)
def test_texts_folded_together_fold_as_each_alone(texts: list[str]) -> None:
    assert fold_all(texts) == [fold(text) for text in texts]


@given(_CHUNKS)
def test_texts_counted_together_count_as_each_alone(texts: list[str]) -> None:
    folds = [fold(text) for text in texts]
    together = term_counts_all(texts, folds)
    alone = [term_counts(text, folded) for text, folded in zip(texts, folds, strict=True)]
    assert together == alone
    assert [list(counts) for counts in together] == [list(counts) for counts in alone]


def test_texts_and_folds_must_pair_up() -> None:
    with pytest.raises(ValueError, match="differ in number"):
        term_counts_all(["湛江", "明天"], ["湛江"])
