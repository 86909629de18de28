"""The second pass: snippets of several pages re-scored over all their chunks, best first;
and end to end, evidence[0] is the answer-bearing passage wherever it sits."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.testing import World, article, hit
from external_query_service.text._ranker import RankerPassage, rank_probabilities
from external_query_service.text._rerank import Candidate, Reranked, rerank
from external_query_service.text._score import TermStats, term_stats
from external_query_service.text._tokens import terms

QUESTION = "湛江港今年货物吞吐量是多少？"
ANSWER = "湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八，集装箱航线继续增加。"
#: A title-like line that repeats the question's common words and answers nothing.
TITLE_LIKE = "湛江港吞吐量专题：湛江港、湛江港口、湛江港吞吐量排名"
CST = timezone(timedelta(hours=8))
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=CST)


def stats_of(*texts: str) -> TermStats:
    return term_stats(terms(text) for text in texts)


def test_snippets_of_several_pages_come_back_best_first() -> None:
    passages = [Candidate(TITLE_LIKE, QUESTION), Candidate(ANSWER, QUESTION)]
    ranked = rerank(passages, stats_of(TITLE_LIKE, ANSWER, "湛江港位于广东。"))
    assert [item.index for item in ranked] == [1, 0]
    assert ranked[0].score > ranked[1].score


def test_equal_scores_keep_the_input_order() -> None:
    # Two reports, no copy of each other, that state the figure alike and add as many other
    # words score the same, in either order.
    spring = "湛江港今年货物吞吐量达到2.6亿吨，春天桃花盛开。"
    autumn = "湛江港今年货物吞吐量达到2.6亿吨，秋天枫叶飘落。"
    stats = stats_of(spring, autumn, "无关")
    for first, second in ((spring, autumn), (autumn, spring)):
        passages = [Candidate(text, QUESTION) for text in (first, second, "无关")]
        ranked = rerank(passages, stats)
        assert [item.index for item in ranked] == [0, 1, 2]
        assert ranked[0].score == ranked[1].score


def test_a_copy_of_a_passage_comes_after_every_passage_of_another_text() -> None:
    # The same report on three sites (one with its own byline), and a weaker one of its own:
    # the first two quoted are the two different reports, the copies after them.
    weaker = "湛江港货物吞吐量稳步增长。"
    bylined = "湛江日报讯 " + ANSWER
    texts = [ANSWER, bylined, ANSWER, weaker]
    ranked = rerank([Candidate(t, QUESTION) for t in texts], stats_of(ANSWER, weaker))
    assert texts[ranked[1].index] == weaker
    assert sorted(item.index for item in (ranked[0], *ranked[2:])) == [0, 1, 2]
    assert min(ranked[0].score, ranked[2].score, ranked[3].score) > ranked[1].score


def test_each_passage_is_scored_against_its_own_query_with_the_shared_stats() -> None:
    stats = stats_of(ANSWER, "茂名港今年吞吐量下降。", "湛江今天多云。")
    passages = [Candidate(ANSWER, QUESTION), Candidate("茂名港今年吞吐量下降。", "茂名港吞吐量")]
    ranked = {item.index: item.score for item in rerank(passages, stats)}
    for index, passage in enumerate(passages):
        alone = rank_probabilities(passage.query, [RankerPassage(passage.text)], stats)[0]
        assert ranked[index] == round(10000 * alone)


def test_the_same_input_always_gives_the_same_order_and_scores() -> None:
    passages = [Candidate(text, QUESTION) for text in (TITLE_LIKE, ANSWER, "湛江今天多云。")]
    stats = stats_of(TITLE_LIKE, ANSWER, "湛江今天多云。")
    first = rerank(passages, stats, ["湛江"])
    assert all(rerank(passages, stats, ["湛江"]) == first for _ in range(3))
    assert all(isinstance(item, Reranked) and 0 <= item.score <= 10000 for item in first)


ENDING_QUESTION = "星河传说大结局是什么"
#: A page's introduction: it names every term of the question, in questions of its own.
INTRO_THAT_ASKS = "星河传说热播，网友都在问：星河传说大结局是什么？和原著一样吗？"
#: Another page's passage that tells the ending.
ENDING = "星河传说大结局是林舟与阿岚在海边重逢，两人一起回到了故乡。"


def test_a_passage_that_tells_outranks_an_earlier_introduction_that_asks() -> None:
    passages = [Candidate(INTRO_THAT_ASKS, ENDING_QUESTION), Candidate(ENDING, ENDING_QUESTION)]
    stats = stats_of(INTRO_THAT_ASKS, ENDING, "星河传说演员表。", "今天的天气很好。")
    ranked = rerank(passages, stats)
    # Both mention every query term; the introduction only inside its questions.
    assert [item.index for item in ranked] == [1, 0]
    assert ranked[0].score > ranked[1].score


#: Two introductions that name every query term outside their questions too: one in its
#: breadcrumb trail, one in a teaser after three questions; neither tells the ending.
INTRO_WITH_TRAIL = (
    "首页 > 娱乐 > 电视剧 > 星河传说大结局剧透\n"
    "电视剧星河传说终于播出，观众期待满满，那么星河传说大结局是什么？和原著小说一样吗？\n"
    "主演林舟是首次挑大梁，为了演好角色，她学骑马、学跳舞。"
)
INTRO_WITH_TEASER = (
    "星河传说大结局是什么？星河传说主角的结局分别是什么？星河传说正在热播，"
    "那么星河传说结局是什么呢？一起来看看下文关于星河传说的大结局。\n"
    "主演林舟是首次挑大梁，为了演好角色，她学骑马、学跳舞。"
)


def test_the_ending_outranks_introductions_that_name_its_terms_in_a_trail_or_a_teaser() -> None:
    texts = (INTRO_WITH_TRAIL, INTRO_WITH_TEASER, ENDING)
    stats = stats_of(*texts, "今天的天气很好。", "星河传说演员表。")
    ranked = rerank([Candidate(text, ENDING_QUESTION) for text in texts], stats)
    assert ranked[0].index == 2
    assert ranked[0].score > ranked[1].score


def test_no_passages_rank_to_nothing() -> None:
    assert rerank([], TermStats()) == []


# -- end to end over loopback ---------------------------------------------------------------


def test_the_answer_from_the_second_page_is_quoted_among_the_first_two(
    world: World,
) -> None:
    # The first hit's page leads with a title-like line full of the question's common words;
    # the second page answers. The fitted ranker weighs the search engine's order too (on the
    # fitting halves it is worth as much as the coverage gap between the two), so the first
    # page's title may keep its place; the answer must still come right after it.
    first = world.page(
        "port-topics.test",
        "/topic",
        article(
            "湛江港吞吐量专题",
            [
                TITLE_LIKE,
                "专题汇集港口相关新闻、图片和视频，欢迎订阅本站的港口频道，获取最新资讯。",
            ],
            published="2026-11-28",
        ),
    )
    second = world.page(
        "port-news.test",
        "/report",
        article(
            "港口生产快报",
            [ANSWER, "港务集团表示，明年将继续扩建深水泊位。"],
            published="2026-11-29",
            site_name="港口新闻网",
        ),
    )
    world.results(QUESTION, [hit(first, "湛江港吞吐量专题", "专题"), hit(second, "快报", "港口")])
    with ExternalQueryService(world.settings(world.searxng()), clock=fixed_clock(NOW)) as service:
        answer = service.answer(QUESTION)

    assert answer.status == "answered"
    assert {item.url for item in answer.evidence} >= {first, second}
    assert any("2.6亿吨" in item.snippet for item in answer.evidence[:2])
    scores = [item.score for item in answer.evidence]
    assert scores == sorted(scores, reverse=True)


def test_evidence_0_tells_the_ending_rather_than_the_first_page_asking_for_it(
    world: World,
) -> None:
    # The first hit's page opens by asking the question; the second page tells the ending.
    asks = world.page(
        "drama-news.test",
        "/intro",
        article(
            "星河传说热播",
            [
                INTRO_THAT_ASKS,
                "该剧由多位新人主演，拍摄历时半年，外景地选在南方的一座海滨小城。",
            ],
            published="2026-11-28",
        ),
    )
    tells = world.page(
        "drama-story.test",
        "/ending",
        article(
            "星河传说剧情",
            [ENDING, "剧中的海滨小城也因此成为热门的旅游目的地，吸引了不少观众前往。"],
            published="2026-11-29",
            site_name="剧情网",
        ),
    )
    world.results(
        ENDING_QUESTION, [hit(asks, "星河传说热播", "热播"), hit(tells, "星河传说剧情", "剧情")]
    )
    with ExternalQueryService(world.settings(world.searxng()), clock=fixed_clock(NOW)) as service:
        answer = service.answer(ENDING_QUESTION)

    assert answer.status == "answered"
    assert answer.evidence[0].url == tells
    assert "海边重逢" in answer.evidence[0].snippet


def test_a_passage_naming_one_part_is_judged_against_that_part_without_its_joiner() -> None:
    from external_query_service.text._rerank import _Parts

    parts = _Parts(("比亚迪", "特斯拉"))
    question = "2025年比亚迪和特斯拉的销量分别是多少？"
    # The conjunction that joined the part left out goes with it: no passage holds it.
    assert parts.part_of(question, "比亚迪2025年销量427万辆。") == "2025年比亚迪 的销量分别是多少？"
    assert parts.part_of(question, "特斯拉交付164万辆。") == "2025年 特斯拉的销量分别是多少？"
    assert parts.part_of(question, "两家公司的销量都创新高。") == question
    three = _Parts(("北京", "上海", "广州"))
    assert three.part_of("北京、上海和广州的人口", "北京常住人口2185万。") == "北京 的人口"


def test_a_passage_naming_a_target_by_another_name_is_judged_against_the_question_so_written() -> (
    None
):
    from external_query_service.text._currencies import currency_aliases
    from external_query_service.text._rerank import _spelled

    spellings = {code: currency_aliases(code) for code in ("USD", "CNY")}
    question = "美元兑人民币汇率是多少"
    assert _spelled(question, "人民币汇率中间价：USD/CNY 7.1", spellings) == "USD兑人民币汇率是多少"
    assert _spelled(question, "1 US dollar buys 7.1 CNY", spellings) == "US Dollar兑CNY汇率是多少"
    # A passage that writes a target as the question does, or names it by no name, leaves it.
    assert _spelled(question, "美元兑人民币 7.1，USD/CNY", spellings) == question
    assert _spelled(question, "港币兑人民币 0.88", spellings) == question
    assert _spelled("usd兑人民币汇率", "USD/CNY 7.1", spellings) == "usd兑CNY汇率"
    assert _spelled(question, "USD/CNY 7.1", {}) == question


def test_a_judged_question_is_answered_when_the_passage_quoted_first_answers() -> None:
    from external_query_service.text._rerank import answered

    first_answers = [Reranked(0, 9000, True), Reranked(1, 8000, False)]
    later_answers = [Reranked(0, 9000, False), Reranked(1, 8000, True)]
    assert answered(first_answers)
    assert not answered(later_answers)
    # Unjudged (news), any passage reaching the ranker's threshold answers.
    assert answered(later_answers, judged=False)
    assert not answered([])
    assert not answered([], judged=False)


def test_the_semantic_judgment_reads_only_the_passage_quoted_first() -> None:
    # The decision reads the first passage alone, so the model (0.4 s of CPU a passage) is
    # asked about that one only; the others are not judged.
    question = "湛江港今年货物吞吐量是多少？"
    texts = [
        "湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八。",
        "湛江港是中国西南沿海的重要港口，港区岸线很长。",
        "今年秋天的新茶上市以后，茶农们忙着采摘和包装。",
    ]
    asked: list[tuple[str, list[str]]] = []

    def similarity(query: str, passages: list[str]) -> list[float]:
        asked.append((query, list(passages)))
        return [0.95] * len(passages)

    stats = term_stats(terms(text) for text in texts)
    ranked = rerank(
        [Candidate(text, question) for text in texts], stats, semantic=True, similarity=similarity
    )
    assert asked == [(question, [texts[ranked[0].index]])]
    assert not any(item.reaches for item in ranked[1:])
