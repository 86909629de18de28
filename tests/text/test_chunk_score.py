from __future__ import annotations

import importlib
import pickle
import pkgutil
import re
import string
import subprocess
import sys
from re import _constants as re_constants  # type: ignore[attr-defined]
from re import _parser as re_parser  # type: ignore[attr-defined]
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from external_query_service._memo import held_bytes
from external_query_service.text import _echo, _score
from external_query_service.text._chunk import Chunk, chunk_text
from external_query_service.text._echo import answer_terms, breadcrumb_spans, fold, question_spans
from external_query_service.text._score import (
    ANSWER_WEIGHT,
    MAX_QUERY_CHARS,
    MIN_COPIED_TERMS,
    MIN_SCORE,
    TERMS_KEPT_BYTES,
    TermStats,
    best_snippets,
    copies,
    kept_terms_bytes,
    pages_stats,
    score_chunks,
    score_with_stats,
    term_stats,
    text_terms,
)
from external_query_service.text._tokens import INTERROGATIVES, query_terms, terms

# Text drawn from pieces that exercise every splitting rule: CJK and Latin terminators,
# closing quotes, commas, newlines and odd whitespace.
_PIECES = st.sampled_from(
    ["汉字", "天气晴", "。", "！", "？", "；", "!", "?", ";", ". ", ".", "”", "」", "，", ",", " ",
     "\n", "\n\n", "\t", "\u3000", "word", "Latin text", "x" * 50, "中" * 70, "a b c "]
)  # fmt: skip
TEXTS = st.lists(_PIECES, max_size=60).map("".join) | st.text(max_size=400)


def assert_chunks_are_slices(text: str, chunks: tuple[Chunk, ...], max_chars: int) -> None:
    previous_end = 0
    for chunk in chunks:
        assert text[chunk.offset : chunk.offset + chunk.length] == chunk.text
        assert chunk.offset >= previous_end
        assert 0 < chunk.length <= max_chars
        assert chunk.text == chunk.text.strip()
        previous_end = chunk.offset + chunk.length
    covered = "".join(chunk.text for chunk in chunks)
    assert "".join(covered.split()) == "".join(text.split())


@given(text=TEXTS, max_chars=st.integers(min_value=1, max_value=120))
def test_chunks_are_ordered_non_overlapping_slices_that_cover_the_text(
    text: str, max_chars: int
) -> None:
    assert_chunks_are_slices(text, chunk_text(text, max_chars=max_chars), max_chars)


def test_empty_or_blank_text_has_no_chunks() -> None:
    assert chunk_text("") == ()
    assert chunk_text(" \n\t\n ") == ()


def test_short_paragraphs_are_merged_up_to_max_chars() -> None:
    text = "\n".join(["第一段。", "第二段。", "第三段。", "长" * 30])
    chunks = chunk_text(text, max_chars=20)
    assert [c.text for c in chunks] == ["第一段。\n第二段。\n第三段。", "长" * 20, "长" * 10]


def test_a_paragraph_that_fits_is_never_split() -> None:
    paragraph = "甲" * 15 + "。" + "乙" * 15 + "。"
    chunks = chunk_text(f"{paragraph}\n{'丙' * 40}", max_chars=40)
    assert chunks[0].text == paragraph


def test_long_chinese_paragraph_splits_at_sentence_ends() -> None:
    sentences = [
        "今天湛江天气晴朗，气温二十八度。",
        "明天有雷阵雨！",
        "后天转多云吗？",
        "请注意防暑；",
    ]
    text = "".join(sentences * 4)
    chunks = chunk_text(text, max_chars=40)
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.text[-1] in "。！？；"


def test_closing_quote_stays_with_its_sentence() -> None:
    text = "他说：“明天出发。”" + "然后大家就散了。" * 6
    chunks = chunk_text(text, max_chars=12)
    assert chunks[0].text == "他说：“明天出发。”"


def test_latin_paragraph_splits_after_full_stop_and_space() -> None:
    text = "The bridge reopened on Wednesday. Buses returned. Traders were glad."
    chunks = chunk_text(text, max_chars=40)
    assert [c.text for c in chunks] == [
        "The bridge reopened on Wednesday.",
        "Buses returned. Traders were glad.",
    ]


def test_decimal_point_does_not_end_a_sentence() -> None:
    text = "The cost was 2.4 million pounds in total. " + "Filler words here. " * 5
    chunks = chunk_text(text, max_chars=45)
    assert chunks[0].text == "The cost was 2.4 million pounds in total."


def test_a_single_sentence_longer_than_max_chars_is_cut_preferably_after_a_comma() -> None:
    text = "甲" * 30 + "，" + "乙" * 30 + "，" + "丙" * 30 + "。"
    chunks = chunk_text(text, max_chars=40)
    assert [c.text for c in chunks] == ["甲" * 30 + "，", "乙" * 30 + "，", "丙" * 30 + "。"]


def test_a_sentence_without_any_break_is_hard_split() -> None:
    text = "x" * 100
    chunks = chunk_text(text, max_chars=40)
    assert [c.length for c in chunks] == [40, 40, 20]


def test_a_short_title_takes_the_next_paragraphs_leading_sentences() -> None:
    title = "湛江港吞吐量"
    body = "湛江港今年货物吞吐量达到2.6亿吨。同比增长百分之八。集装箱航线继续增加。" * 2
    chunks = chunk_text(f"{title}\n{body}", max_chars=60)
    assert chunks[0].text.startswith(f"{title}\n湛江港今年货物吞吐量达到2.6亿吨。")
    assert chunks[0].text.endswith("。")
    assert len(chunks[0].text) > len(title) + 20


def test_a_chunk_long_enough_does_not_borrow_from_a_paragraph_that_does_not_fit() -> None:
    first = "甲" * 25 + "。"
    second = "乙" * 15 + "。" + "丙" * 15 + "。"
    chunks = chunk_text(f"{first}\n{second}", max_chars=40, min_chars=20)
    assert [c.text for c in chunks] == [first, second]


def test_a_long_paragraph_is_packed_into_chunks_that_end_at_sentence_ends() -> None:
    text = "标题\n" + "第一句很短。第二句稍微长一点点！另一句的第一句。第三句？" * 6
    chunks = chunk_text(text, max_chars=30)
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.text[-1] in "。！？"


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        chunk_text("text", max_chars=0)


# --- scoring ------------------------------------------------------------------------------


def chunks_of(*texts: str) -> list[Chunk]:
    offset, chunks = 0, []
    for text in texts:
        chunks.append(Chunk(offset, len(text), text))
        offset += len(text) + 1
    return chunks


def test_chinese_query_prefers_the_matching_chunk() -> None:
    chunks = chunks_of(
        "市政府召开新闻发布会，介绍今年的招商引资情况。",
        "北京明天天气晴，最高气温二十八度，北风二级。",
        "本网站所有内容未经许可不得转载。",
    )
    scored = score_chunks(chunks, "北京明天天气怎么样")
    assert scored[0].chunk is chunks[1]
    assert scored[0].score >= MIN_SCORE
    assert scored[0].score > scored[1].score


def test_latin_query_ignores_word_order_and_case() -> None:
    chunks = chunks_of(
        "Ferry timetable changes for the summer season.",
        "CITRIC ACID descales a KETTLE quickly and cheaply.",
    )
    scored = score_chunks(chunks, "kettle descale citric acid")
    assert scored[0].chunk is chunks[1]
    assert scored[0].query_score >= 7000


def test_scores_are_integer_basis_points() -> None:
    scored = score_chunks(chunks_of("湛江今天多云", "Weather in Zhanjiang"), "湛江天气", ["湛江"])
    for item in scored:
        assert isinstance(item.score, int)
        assert isinstance(item.query_score, int)
        assert 0 <= item.score <= 10000
        assert 0 <= item.query_score <= 10000


def test_target_hit_needs_fuzzy_containment_not_a_shared_character() -> None:
    chunks = chunks_of("湛江市今天多云转晴。", "江门市今天多云转晴。")
    scored = {item.chunk.offset: item for item in score_chunks(chunks, "今天天气", ["湛江"])}
    assert scored[chunks[0].offset].target_hits == ("湛江",)
    assert scored[chunks[1].offset].target_hits == ()
    assert scored[chunks[0].offset].score > scored[chunks[1].offset].score


def test_target_matching_folds_width_and_case() -> None:
    scored = score_chunks(chunks_of("ＩＢＭ shares rose on Monday."), "", ["ibm", "IBM"])
    assert scored[0].target_hits == ("ibm",)


def test_score_combines_query_and_target_coverage_as_documented() -> None:
    chunk = chunks_of("湛江今天多云，江门今天小雨。")
    alone = score_chunks(chunk, "今天天气")[0]
    both = score_chunks(chunk, "今天天气", ["湛江", "江门"])[0]
    half = score_chunks(chunk, "今天天气", ["湛江", "茂名"])[0]
    assert alone.score == alone.query_score
    assert both.score == (6 * both.query_score + 4 * 10000) // 10
    assert half.score == (6 * half.query_score + 4 * 5000) // 10
    assert half.target_hits == ("湛江",)


def test_a_fragment_that_only_occurs_inside_the_query_does_not_score_full() -> None:
    chunks = chunks_of("北京", "北京明天天气晴，最高气温二十八度。")
    scored = score_chunks(chunks, "北京明天天气怎么样")
    fragment = next(item for item in scored if item.chunk.text == "北京")
    assert fragment.query_score < 5000
    assert scored[0].chunk.text != "北京"


def test_very_long_query_is_truncated() -> None:
    chunks = chunks_of("北京明天天气晴，最高气温二十八度。")
    head = "北京明天天气" + "怎么样" * (MAX_QUERY_CHARS // 3)
    assert (
        score_chunks(chunks, head[:MAX_QUERY_CHARS])[0].score
        == score_chunks(chunks, head + "无关的内容" * 1000)[0].score
    )


def test_results_are_sorted_by_score_then_offset() -> None:
    chunks = chunks_of("无关内容一", "湛江天气晴", "无关内容二", "湛江天气晴")
    scored = score_chunks(chunks, "湛江天气晴")
    assert [item.chunk.offset for item in scored[:2]] == [chunks[1].offset, chunks[3].offset]
    assert [item.score for item in scored] == sorted((item.score for item in scored), reverse=True)


def test_a_rare_term_outranks_a_repeated_common_one() -> None:
    # 湛江 is in every chunk; 吞吐量 in one. Repeating the common word earns nothing.
    chunks = chunks_of(
        "湛江新闻。湛江湛江湛江，湛江天气，湛江交通，湛江美食。",
        "湛江港今年的吞吐量创下新高。",
        "湛江市区今天多云。",
        "湛江的夜市很热闹。",
    )
    scored = score_chunks(chunks, "湛江港吞吐量")
    assert scored[0].chunk is chunks[1]
    repeated = next(item for item in scored if item.chunk is chunks[0])
    assert scored[0].score > repeated.score


def test_term_weights_come_from_the_collection_not_from_the_chunk_alone() -> None:
    chunk = chunks_of("北京明天多云。")[0]
    common = chunks_of("北京今天晴。", "北京后天雨。", "上海明天晴。")
    alone = score_chunks([chunk], "北京明天")[0].score
    # 北京 is common and 明天 rare in the larger collection: the chunk holds both, so full
    # marks either way; a chunk holding only the common word scores below one with the rare.
    assert alone == 10000
    scored = score_chunks([*common, chunk], "北京明天")
    only_common = next(item for item in scored if item.chunk is common[0])
    only_rare = next(item for item in scored if item.chunk is common[2])
    assert only_rare.score > only_common.score


def test_borrowed_stats_decide_rarity_and_count_a_term_they_never_saw() -> None:
    chunk = chunks_of("北京明天多云。")[0]
    stats = term_stats(terms(text) for text in ["北京今天晴。", "北京后天雨。", "上海晴。"])
    scored = score_chunks([chunk], "北京明天", stats=stats)[0]
    assert scored.query_score == 10000
    # Against stats where 明天 is common and 北京 rare, naming 北京 is worth more.
    everywhere = term_stats(terms(text) for text in ["明天晴。", "明天雨。", "北京"])
    capital, tomorrow = chunks_of("北京多云。", "明天多云。")
    scored = {
        s.chunk.text: s.score
        for s in score_chunks([capital, tomorrow], "北京明天", stats=everywhere)
    }
    assert scored["北京多云。"] > 5000 > scored["明天多云。"]


def test_term_stats_add_up_to_the_stats_of_the_union() -> None:
    a = [terms("北京明天多云。"), terms("上海晴。")]
    b = [terms("北京后天雨。")]
    assert term_stats(a) + term_stats(b) == term_stats(a + b)
    assert term_stats(a) + TermStats() == term_stats(a)


_TERM_LISTS = st.lists(st.lists(st.sampled_from("北京上海明天晴雨"), max_size=6), max_size=8)


@given(st.lists(_TERM_LISTS, max_size=5))
def test_summed_term_stats_count_as_a_scan_of_every_chunk_would(
    pages: list[list[list[str]]],
) -> None:
    # The counts a question reads, against their definition over the chunks' term sets.
    summed = sum((term_stats(page) for page in pages), TermStats())
    sets = [set(chunk) for page in pages for chunk in page]
    assert summed.chunks == len(sets)
    for term in "北京上海明天晴雨X":
        assert summed.df(term) == sum(1 for chunk in sets if term in chunk)
    assert summed.frequencies == {t: summed.df(t) for t in set().union(*sets)}
    # BM25's average length: the same float as averaging the lengths one by one.
    lengths = [len(chunk) for chunk in sets]
    if lengths:
        assert summed.term_total / summed.chunks == sum(lengths) / len(lengths)


def test_a_copy_of_a_page_adds_no_term_statistics() -> None:
    article = [terms("湛江港今年货物吞吐量达到2.6亿吨。"), terms("湛江港位于广东西南部。")]
    other = [terms("茂名港今年吞吐量下降。")]
    kept = ["湛江港今年货物吞吐量达到2.6亿吨。"]
    once = pages_stats([(term_stats(article), kept), (term_stats(other), ["茂名港"])])
    copied = pages_stats(
        [(term_stats(article), kept), (term_stats(other), ["茂名港"])]
        + [(term_stats(article), kept)] * 4
    )
    assert copied == once == term_stats(article) + term_stats(other)


def test_a_page_copied_with_its_own_byline_adds_no_term_statistics() -> None:
    report = "湛江港今年货物吞吐量达到2.6亿吨，同比增长百分之八，集装箱航线继续增加。"
    bylined = "湛江日报讯 " + report
    first = (term_stats([terms(report)]), [report])
    again = (term_stats([terms(bylined)]), [bylined])
    assert pages_stats([first, again]) == first[0]


def test_copies_are_texts_that_share_most_of_their_terms() -> None:
    report = "湛江港今年货物吞吐量达到2.6亿吨，同比增长百分之八，集装箱航线继续增加。"
    other = "湛江港今年集装箱吞吐量下降，航线减少，码头工人担心明年的收入。"
    assert copies([report, other, "本报讯 " + report, other, "天气晴"]) == [0, 1, 0, 1, 4]
    assert copies([]) == []


def test_pages_that_repeat_some_snippets_or_kept_none_still_count() -> None:
    # A page counts as a copy only when every snippet it kept, one at least, was kept before.
    first = (term_stats([terms("北京明天多云。")]), ["北京明天多云。"])
    overlapping = (term_stats([terms("北京明天多云，后天雨。")]), ["北京明天多云。", "后天雨。"])
    empty = (term_stats([terms("上海晴。")]), [])
    total = pages_stats([first, overlapping, empty, empty])
    assert total == first[0] + overlapping[0] + empty[0] + empty[0]
    assert pages_stats([]) == TermStats()


def test_score_with_stats_returns_the_stats_of_its_own_chunks() -> None:
    chunks = chunks_of("北京明天多云。", "上海晴。")
    scored, stats = score_with_stats(chunks, "北京天气")
    assert scored == score_chunks(chunks, "北京天气")
    assert stats == term_stats(terms(c.text) for c in chunks)


def test_scoring_is_deterministic_whatever_the_input_order() -> None:
    chunks = chunks_of(
        "湛江港今年的吞吐量创下新高。", "湛江市区今天多云。", "湛江港吞吐量", "无关内容。"
    )
    first = score_chunks(chunks, "湛江港今年吞吐量", ["湛江"])
    again = score_chunks(list(reversed(chunks)), "湛江港今年吞吐量", ["湛江"])
    assert first == again
    assert [(i.chunk.offset, i.score) for i in first] == [(i.chunk.offset, i.score) for i in again]


def test_empty_query_without_targets_scores_zero() -> None:
    assert [item.score for item in score_chunks(chunks_of("任何内容"), "")] == [0]


def test_best_snippets_respects_limit_and_min_score() -> None:
    chunks = chunks_of(
        "北京明天天气晴，最高气温二十八度。",
        "北京明天天气多云，夜间有小雨。",
        "本网站所有内容未经许可不得转载。",
    )
    best = best_snippets(chunks, "北京明天天气", limit=2)
    assert len(best) == 2
    assert {item.chunk.offset for item in best} == {chunks[0].offset, chunks[1].offset}
    assert all(item.score >= MIN_SCORE for item in best)
    assert best_snippets(chunks, "北京明天天气", limit=5, min_score=10001) == []
    assert len(best_snippets(chunks, "北京明天天气", limit=5, min_score=0)) == 3


# -- spans that ask the question earn less than spans that answer it --------------------------

ENDING = "星河传说大结局是什么"
#: An introduction that asks the question in its own words: every query term, no answer.
ASKS = "电视剧星河传说终于播出，观众期待满满，那么星河传说大结局是什么？和原著小说一样吗？"
#: The passage that tells the ending, naming the same terms in a statement.
TELLS = "星河传说大结局是林舟与阿岚在海边重逢，两人一起回到了故乡。"


def spans_of(text: str, question: str = "") -> list[str]:
    folded = fold(text)
    return [folded[start:end] for start, end in question_spans(folded, fold(question))]


def test_question_sentences_and_interrogative_clauses_are_question_spans() -> None:
    text = "星河传说的大结局是什么？很多观众都在问。\n哪里能看星河传说全集，答案见下文。"
    assert spans_of(text) == ["星河传说的大结局是什么？", "哪里能看星河传说全集"]
    assert spans_of("Where is the station? It is on Main Street.") == ["where is the station?"]


def test_a_label_and_its_value_or_a_count_with_ji_are_no_question() -> None:
    # A colon joins a label to its value; 几十万 counts, it does not ask.
    assert spans_of("身高:168cm，体重:50kg。礼服价值几十万。") == []


def test_a_copy_of_the_question_is_a_span_wherever_it_sits() -> None:
    assert spans_of("儿童感冒的护理方法_育儿频道", "儿童感冒的护理方法？") == ["儿童感冒的护理方法"]


def test_answer_terms_are_the_query_terms_mentioned_outside_the_question_spans() -> None:
    wanted = query_terms(ENDING)
    assert answer_terms(ASKS, "", wanted) == set()
    assert answer_terms(TELLS, "", wanted) == set(wanted)
    # Terms are matched folded: full-width letters meet their ASCII terms.
    assert answer_terms("ＰＶＣ地垫最耐用。", "", ["pvc"]) == {"pvc"}


def test_a_passage_that_tells_outranks_one_that_asks_with_the_same_words() -> None:
    asks, tells, other = chunks_of(ASKS, TELLS, "今天的天气很好。")
    scored = {item.chunk.text: item for item in score_chunks([asks, tells, other], ENDING)}
    # Both cover every query term; only the statement earns the answering part.
    assert scored[TELLS].query_score == 10000
    assert scored[ASKS].query_score == 10000 * (10 - ANSWER_WEIGHT) // 10
    assert score_chunks([asks, tells, other], ENDING)[0].chunk is tells


def test_a_heading_that_asks_leaves_the_answer_below_it_most_of_its_score() -> None:
    # The heading asks; the text below answers without repeating the question's words.
    heading_and_answer = "爬行垫什么材质好\n聚乙烯材质无毒无味，防潮隔热，宝宝爬行更安全。"
    scored = score_chunks(chunks_of(heading_and_answer, "今天的天气很好。"), "爬行垫什么材质好")
    assert MIN_SCORE < scored[0].query_score < 10000
    assert scored[0].chunk.text == heading_and_answer


def test_a_copied_question_is_an_echo_but_a_copied_keyword_pair_is_not() -> None:
    title = "儿童感冒的护理方法_育儿频道。多喝水，注意休息。"
    question = "儿童感冒的护理方法"
    assert len(set(query_terms(question))) >= MIN_COPIED_TERMS
    # The title copies the question and the rest never names 护理 or 方法: no answering credit.
    assert score_chunks(chunks_of(title), question)[0].query_score < 10000
    # A passage naming a two-word query in a row simply answers it.
    assert len(set(query_terms("北京明天"))) < MIN_COPIED_TERMS
    assert score_chunks(chunks_of("北京明天多云。"), "北京明天")[0].query_score == 10000


def test_a_breadcrumb_trail_is_navigation_not_an_answer() -> None:
    text = "首页 > 娱乐 > 电视剧 > 星河传说大结局剧透\n主演林舟是首次挑大梁。\n气温>30度时防暑。"
    folded = fold(text)
    # Three items or more joined by > (or ») make a trail; one comparison does not.
    assert [folded[start:end] for start, end in breadcrumb_spans(folded)] == [
        "首页 > 娱乐 > 电视剧 > 星河传说大结局剧透"
    ]
    assert breadcrumb_spans("资讯»体育»星河队夺冠") == [(0, 11)]
    assert breadcrumb_spans("首页-->新闻-->星河队夺冠") == [(0, 15)]
    # A link's arrows are one separator with one item before it: no trail.
    assert breadcrumb_spans("欢迎参与修正。立即前往>>") == []
    wanted = query_terms(ENDING)
    # The trail names the subject and 大结局; only 是 is said in the passage itself.
    assert answer_terms(text, "", wanted) == {"是"}
    assert answer_terms(text.replace(" > ", " "), "", wanted) == set(wanted)


def test_a_term_named_in_passing_after_the_questions_that_use_it_is_still_asked() -> None:
    wanted = query_terms(ENDING)
    # Three questions name 星河传说 and 结局; one teaser names them once more.
    teaser = (
        "星河传说大结局是什么？主角的结局分别是什么？星河传说的结局是什么呢？"
        "一起来看看下文星河传说的剧情。"
    )
    assert answer_terms(teaser, "", wanted) == set()
    # Asked once and told once (or more): answered.
    asks_then_tells = "星河传说大结局是什么？星河传说大结局是林舟与阿岚在海边重逢。"
    assert answer_terms(asks_then_tells, "", wanted) == set(wanted)


def test_an_introduction_that_names_the_subject_only_in_its_trail_scores_below_the_ending() -> None:
    intro = "首页 > 娱乐 > 电视剧 > 星河传说大结局剧透\n" + ASKS + "\n主演林舟是首次挑大梁。"
    scored = score_chunks(chunks_of(intro, TELLS, "今天的天气很好。"), ENDING)
    assert scored[0].chunk.text == TELLS
    assert scored[0].query_score == 10000 > scored[1].query_score


# -- every pattern on the evidence path is safe from catastrophic backtracking ---------------
# (pages and files are untrusted input: a pattern they reach must run in linear time)
#
# Two checks, neither timed: a structural audit of each compiled pattern (no unbounded repeat
# inside another, and no two unbounded single-character runs that can match the same
# character side by side, the shapes behind ``(a+)+$`` and ``[ \t]+(.+?)[ \t]*``), and a run
# of every pattern over long adversarial strings, which a backtracking pattern never finishes.

_PROBE = string.printable + "\u00a0\u3000\u2028。！？；，、：”’」』）】年月日号中文"
_CATEGORIES = {
    re_constants.CATEGORY_DIGIT: lambda c: c.isdigit(),
    re_constants.CATEGORY_NOT_DIGIT: lambda c: not c.isdigit(),
    re_constants.CATEGORY_SPACE: lambda c: c.isspace(),
    re_constants.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
    re_constants.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    re_constants.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
}
_REPEATS = (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT)
_ZERO_WIDTH = (re_constants.AT, re_constants.ASSERT, re_constants.ASSERT_NOT)


def _class_matches(items: Any, char: str) -> bool:
    negate = hit = False
    for op, arg in items:
        if op is re_constants.NEGATE:
            negate = True
        elif op is re_constants.LITERAL:
            hit |= ord(char) == arg
        elif op is re_constants.RANGE:
            hit |= arg[0] <= ord(char) <= arg[1]
        elif op is re_constants.CATEGORY:
            hit |= _CATEGORIES[arg](char)
    return hit != negate


def _single_char(node: Any) -> frozenset[str] | None:
    """The probe characters a one-character node matches; None for anything else."""
    op, arg = node
    if op is re_constants.SUBPATTERN and len(arg[-1].data) == 1:
        return _single_char(arg[-1].data[0])
    if op is re_constants.LITERAL:
        return frozenset(c for c in _PROBE if ord(c) == arg)
    if op is re_constants.NOT_LITERAL:
        return frozenset(c for c in _PROBE if ord(c) != arg)
    if op is re_constants.ANY:
        return frozenset(c for c in _PROBE if c != "\n")
    if op is re_constants.IN:
        return frozenset(c for c in _PROBE if _class_matches(arg, c))
    return None


def _has_unbounded(items: Any) -> bool:
    for op, arg in items:
        if op in _REPEATS and (arg[1] == re_constants.MAXREPEAT or _has_unbounded(arg[2].data)):
            return True
        if op is re_constants.SUBPATTERN and _has_unbounded(arg[-1].data):
            return True
        if op is re_constants.BRANCH and any(_has_unbounded(b.data) for b in arg[1]):
            return True
    return False


def _audit(items: Any, live: frozenset[str], problems: list[str]) -> frozenset[str]:
    """Walk one sequence; ``live`` holds what the last unbounded run could still absorb."""
    for node in items:
        op, arg = node
        if op in _REPEATS:
            low, high, body = arg
            if high == re_constants.MAXREPEAT and _has_unbounded(body.data):
                problems.append("an unbounded repeat inside an unbounded repeat")
            _audit(body.data, frozenset(), problems)
            chars = _single_char(body.data[0]) if len(body.data) == 1 else None
            if high == re_constants.MAXREPEAT:
                if chars is not None and live & chars:
                    problems.append("two unbounded runs over the same characters side by side")
                live = chars or frozenset()
            elif low > 0 and (chars is None or not live & chars):
                live = frozenset()
        elif op is re_constants.SUBPATTERN:
            live = _audit(arg[-1].data, live, problems)
        elif op is re_constants.BRANCH:
            live = frozenset().union(*(_audit(b.data, live, problems) for b in arg[1]))
        elif op in _ZERO_WIDTH:
            if op is not re_constants.AT:
                _audit(arg[1].data, frozenset(), problems)
        else:
            chars = _single_char(node)
            if chars is None or not live & chars:
                live = frozenset()
    return live


def _module_patterns() -> dict[str, re.Pattern[Any]]:
    import external_query_service.adapters as adapters
    import external_query_service.gateway as gateway
    import external_query_service.net as net
    import external_query_service.text as text
    import external_query_service.verifier as verifier

    names = ["external_query_service.planner._structured", "external_query_service.net._sites"]
    for package in (net, text, gateway, adapters, verifier):
        names += [
            info.name for info in pkgutil.iter_modules(package.__path__, package.__name__ + ".")
        ]
    # Language tags come from settings and hosts, at most 64 characters, never from evidence.
    names.remove("external_query_service.text._language")
    found: dict[str, re.Pattern[Any]] = {}
    for name in names:
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found[f"{name.rsplit('.', 1)[1].lstrip('_')}.{attribute}"] = value
    return found


PATTERNS = _module_patterns()


def test_the_audited_patterns_are_all_the_patterns_on_the_evidence_path() -> None:
    # A new pattern must be added here, and so pass the two checks below.
    assert sorted(PATTERNS) == [
        "boilerplate._ANCHOR",
        "boilerplate._SEPARATORS",
        "brave._TAG",
        "chunk._LINE",
        "chunk._SENTENCE_END",
        "conflicts._SENTENCE_END",
        "copies._RUNS",
        "copies._WORDS",
        "dates._DATE",
        "decode._CHARSET_ATTR",
        "decode._META_TAG",
        "decode._XML_DECL",
        "echo._ASKS",
        "echo._CLAUSE_BREAK",
        "echo._COMPATIBLE",
        "echo._INTERROGATIVE",
        "echo._SENTENCE",
        "extract._CJK_RUN",
        "extract._CONTROLS",
        "extract._DOCTYPE_OPEN",
        "extract._HAN",
        "extract._HANGUL",
        "extract._KANA",
        "extract._LANG_TAG",
        "extract._NEWLINES",
        "extract._OTHER_NEWLINE",
        "extract._REFUSED_CHARS",
        "extract._SENTENCE",
        "local_docs._HEADING",
        "page_date._CLASS_PATTERN",
        "page_date._ID_CLASS_PATTERN",
        "page_date._TAGS",
        "page_title._HEADLINE_CLASS",
        "quantities._QUANTITY",
        "quantities._RANGE",
        "targets._WORD_DIVISION",
        "tokens._COMPATIBILITY",
        "tokens._FOLDED_OTHERWISE",
        "tokens._HAN_RUN",
        "tokens._OTHER_RUN",
        "values._ARABIC",
        "values._WORD",
        "visible._PLAIN",
    ]


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_no_pattern_has_a_backtracking_shape(name: str) -> None:
    pattern = PATTERNS[name]
    problems: list[str] = []
    _audit(re_parser.parse(pattern.pattern, pattern.flags).data, frozenset(), problems)
    assert problems == []


@pytest.mark.parametrize(
    "shape",
    [r"(a+)+$", r"(?:\w+\s?)*!", r"^#+[ \t]+(.+?)[ \t]*#*[ \t]*$", r"(\d+|\w+)*x", r"\s*\s*$"],
)
def test_the_audit_catches_known_catastrophic_shapes(shape: str) -> None:
    problems: list[str] = []
    _audit(re_parser.parse(shape).data, frozenset(), problems)
    assert problems


def _adversarial(text: bool) -> list[Any]:
    heads = ["", "# ", "<meta ", "<?xml encoding=", "charset=", "2025", "5月", "May ", "。"]
    runs = [" ", "\t", "a", "1", "#", "。", "<", "=", "-", "年", ".", "\n"]
    samples = [head + run * 5000 + "!" for head in heads for run in runs]
    samples.append(("# a " + " " * 3000 + "#" * 3000 + " " * 3000 + "b\n") * 2)
    return list(samples) if text else [s.encode("utf-8") for s in samples]


#: Runs in a child process: a regex stuck in C holds the GIL, so only a process can be timed out.
_SCAN_TO_THE_END = """
import pickle, sys
pattern, samples = pickle.loads(sys.stdin.buffer.read())
for sample in samples:
    ends = [match.end() for match in pattern.finditer(sample)]
    pattern.search(sample)
    print(len(ends))
"""

#: A linear pattern scans all samples in well under a second; a catastrophic one takes minutes.
_SCAN_LIMIT_S = 60


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_every_pattern_scans_long_adversarial_text_to_the_end(name: str) -> None:
    pattern = PATTERNS[name]
    samples = _adversarial(isinstance(pattern.pattern, str))
    try:
        scanned = subprocess.run(
            [sys.executable, "-c", _SCAN_TO_THE_END],
            input=pickle.dumps((pattern, samples)),
            capture_output=True,
            timeout=_SCAN_LIMIT_S,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name} did not finish {len(samples)} adversarial scans in {_SCAN_LIMIT_S}s")
    assert len(scanned.stdout.split()) == len(samples)


def test_a_traditional_passage_answers_a_simplified_question_and_back() -> None:
    simplified_page = chunks_of(
        "台湾的经济发展很快，出口增长明显。", "本网站所有内容未经许可不得转载。"
    )
    traditional_page = chunks_of(
        "臺灣的經濟發展很快，出口增長明顯。", "本網站所有內容未經許可不得轉載。"
    )
    same_script = score_chunks(simplified_page, "台湾经济发展怎么样")
    for chunks, question in (
        (traditional_page, "台湾经济发展怎么样"),
        (simplified_page, "臺灣經濟發展怎麼樣"),
    ):
        scored = score_chunks(chunks, question)
        assert scored[0].chunk is chunks[0]
        assert [item.score for item in scored] == [item.score for item in same_script]


def test_a_target_is_hit_with_or_without_its_division_word() -> None:
    chunks = chunks_of("湛江今天多云转晴。", "江门今天多云转晴。")
    scored = {item.chunk.offset: item for item in score_chunks(chunks, "今天天气", ["湛江市"])}
    assert scored[chunks[0].offset].target_hits == ("湛江市",)
    assert scored[chunks[1].offset].target_hits == ()


def test_the_kept_chunk_cuts_hold_at_most_their_byte_bound() -> None:
    # 2,048 distinct Chinese chunks of 360 characters, cut: kept by their number (as they
    # were), they would hold several times the bound.
    texts = [
        f"第{n}号" + "".join(chr(0x4E00 + (n * 7 + i * 13) % 20000) for i in range(356))
        for n in range(2048)
    ]
    cuts = [text_terms(text) for text in texts]
    held = sum(held_bytes(text) + held_bytes(cut) for text, cut in zip(texts, cuts, strict=True))
    assert held > 3 * TERMS_KEPT_BYTES
    assert TERMS_KEPT_BYTES // 2 < kept_terms_bytes() <= TERMS_KEPT_BYTES
    assert text_terms(texts[-1]) is cuts[-1]  # the most recent are kept
    assert text_terms(texts[0]) is not cuts[0]  # the oldest made room


def test_scoring_with_keep_keeps_only_the_best_chunks_cuts() -> None:
    # Fresh texts (no earlier test cut them): the scores and stats are those of keeping every
    # cut, and only the best-scored chunk's cut is kept.
    weather = "湛江明天多云转晴，东南风三级。"
    texts = [f"鹤山第{n}号公告：" + weather * (n % 3 + 1) for n in range(6)]
    chunks = [Chunk(10_000 * n, len(text), text) for n, text in enumerate(texts)]
    kept, stats = score_with_stats(chunks, "鹤山湛江明天天气", keep=1)
    best = kept[0].chunk.text
    assert [_score._kept_cut(text) is not None for text in texts] == [t == best for t in texts]
    scored, all_stats = score_with_stats(chunks, "鹤山湛江明天天气")
    assert [(item.score, item.chunk) for item in kept] == [
        (item.score, item.chunk) for item in scored
    ]
    assert stats == all_stats


@given(
    st.lists(
        st.sampled_from([*INTERROGATIVES, "为", "多", "哪", "怎", "如", "么", "云", "？", "x"]),
        max_size=8,
    ).map("".join)
)
def test_the_interrogative_scan_finds_what_the_plain_alternation_finds(text: str) -> None:
    words = INTERROGATIVES - {"几"}
    plain = re.compile("|".join(sorted(words, key=len, reverse=True)))
    grouped = re.compile(_echo._holding_any(words))
    assert bool(grouped.search(text)) == bool(plain.search(text))
    for start in range(len(text)):
        assert bool(grouped.search(text, start, len(text) - 1)) == bool(
            plain.search(text, start, len(text) - 1)
        )
