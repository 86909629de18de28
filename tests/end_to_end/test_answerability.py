"""Answers, not mentions: a question is answered only from a passage that states what it asks.

Each question is asked with no ``query_semantics`` (the fallback plan) against a loopback
search engine whose results are real article pages, as a RAG host's external branch asks.
"""

from __future__ import annotations

import pytest

from external_query_service.testing import World, article, hit
from tests.support.world import make_service, serve_articles

QUESTION = "蓝湾大桥的主跨长度是多少米？"
#: Passages about the bridge that never state its span.
RELATED = (
    "蓝湾大桥位于滨海新区，是连接东西两岸的交通要道，每天有大量车辆从桥上通行。",
    "蓝湾大桥建成通车以后，两岸居民往来更加方便，周边的商业和旅游也随之发展起来。",
    "市交通部门表示，蓝湾大桥将在今年冬季进行例行检修，检修期间部分车道会临时封闭。",
    "蓝湾大桥的夜景灯光工程已经完工，每晚七点到十一点开放灯光秀，吸引很多市民拍照。",
    "滨海新区还规划建设第二座跨海大桥，预计明年开工建设，目前正在进行环境影响评估。",
)
SPAN = "设计资料显示，蓝湾大桥是一座双塔斜拉桥，主跨长度为680米，桥面宽33米，设计时速80公里。"


def serve(world: World, question: str, texts: tuple[str, ...]) -> list[str]:
    """One article page a passage, listed in this order by the search engine."""
    return serve_articles(
        world,
        question,
        texts,
        site="site",
        title="滨海新区新闻",
        published="2026-11-29",
        listed=("蓝湾大桥", "滨海新区"),
    )


def ask(world: World, question: str) -> object:
    with make_service(world, world.searxng(), network={"max_pages": 5}) as service:
        return service.answer(question)


def test_passages_that_only_mention_the_subject_are_declined(world: World) -> None:
    serve(world, QUESTION, RELATED)
    answer = ask(world, QUESTION)
    assert (answer.status, answer.reason) == ("insufficient_evidence", "no_matching_evidence")  # type: ignore[attr-defined]
    assert answer.evidence == ()  # type: ignore[attr-defined]


def test_the_same_passages_with_one_that_states_the_span_are_answered_from_it(
    world: World,
) -> None:
    urls = serve(world, QUESTION, (*RELATED[:4], SPAN))
    answer = ask(world, QUESTION)
    assert answer.status == "answered"  # type: ignore[attr-defined]
    assert answer.evidence[0].url == urls[4]  # type: ignore[attr-defined]
    assert "680米" in answer.text  # type: ignore[attr-defined]


def test_an_answer_the_engine_lists_fourth_comes_before_a_passage_it_lists_first_that_asks(
    world: World,
) -> None:
    # The first result names every term of the question and states nothing; the fourth
    # states the span in fewer of its words.
    first = "关于蓝湾大桥的主跨长度，大桥管理处表示将在通车一周年时公布详细的设计资料。"
    span = "据设计单位介绍，大桥主跨680米，是目前省内跨度最大的斜拉桥。"
    urls = serve(world, QUESTION, (first, RELATED[1], RELATED[2], span))
    answer = ask(world, QUESTION)
    assert answer.status == "answered"  # type: ignore[attr-defined]
    assert answer.evidence[0].url == urls[3]  # type: ignore[attr-defined]
    assert "680米" in answer.text  # type: ignore[attr-defined]


def test_pages_that_only_ask_the_question_come_after_the_page_that_answers_it(
    world: World,
) -> None:
    # Forum threads titled with the question ask it again above one sentence about the
    # bridge: every word of the question and nothing it asks. The engine lists them first.
    asking = [
        world.page(
            f"forum{n}.test",
            "/thread",
            article(QUESTION, [QUESTION, RELATED[n]], published="2026-11-29", site_name=f"论坛{n}"),
        )
        for n in range(3)
    ]
    answering = world.page(
        "paper.test",
        "/bridge",
        article(
            "滨海新区新闻",
            ["据设计单位介绍，蓝湾大桥主跨680米，是目前省内跨度最大的斜拉桥。"],
            published="2026-11-29",
            site_name="滨海日报",
        ),
    )
    world.results(QUESTION, [hit(url, "蓝湾大桥", "滨海新区") for url in (*asking, answering)])
    answer = ask(world, QUESTION)
    assert answer.status == "answered"  # type: ignore[attr-defined]
    assert answer.evidence[0].url == answering  # type: ignore[attr-defined]
    assert "680米" in answer.text  # type: ignore[attr-defined]


def test_a_name_the_page_spells_apart_still_answers(world: World) -> None:
    # The question writes the model as one run of letters and digits, the page with spaces:
    # the segmenter cuts them into different terms, the characters they share still count.
    question = "蓝湾BX700Pro型游艇的最大航速是多少节？"
    texts = (
        "蓝湾游艇公司发布的 BX 700 Pro 型游艇最大航速为38节，续航里程约四百海里。",
        "蓝湾游艇公司今年在滨海新区新开了一家展厅，展出多款家用游艇和帆船。",
    )
    urls = serve(world, question, texts)
    answer = ask(world, question)
    assert answer.status == "answered"  # type: ignore[attr-defined]
    assert answer.evidence[0].url == urls[0]  # type: ignore[attr-defined]
    assert "38节" in answer.text  # type: ignore[attr-defined]


#: An article that states the span in words other than the question's ("两塔之间的一跨",
#: not "主跨长度"): answerable, and not by a wide margin.
SYNDICATED = [
    "蓝湾大桥于2019年建成通车，连接滨海新区东西两岸。",
    "大桥为双塔斜拉桥，两塔之间的一跨长达680米。",
    "通车以来，大桥日均车流量超过五万辆。",
]


@pytest.mark.parametrize("bylined", [False, True], ids=["verbatim", "own-byline"])
@pytest.mark.parametrize("sites", [1, 5])
def test_an_article_syndicated_on_five_sites_is_answered_as_when_on_one(
    world: World, sites: int, bylined: bool
) -> None:
    # Counted once a page, the five copies made every word the article repeats look as
    # common as the bridge's name, and the copies were refused where one page was answered;
    # each site may open the article with a byline of its own.
    urls = [
        world.page(
            f"paper{n}.test",
            "/bridge",
            article(
                "蓝湾大桥建成五周年",
                [f"本报讯 记者 张{n}", *SYNDICATED] if bylined else SYNDICATED,
                published="2026-11-29",
                site_name=f"报{n}",
            ),
        )
        for n in range(sites)
    ]
    world.results(QUESTION, [hit(url, "蓝湾大桥", "滨海新区") for url in urls])
    answer = ask(world, QUESTION)
    assert answer.status == "answered"  # type: ignore[attr-defined]
    assert "680米" in answer.text  # type: ignore[attr-defined]
    assert {e.url for e in answer.evidence} == set(urls)  # type: ignore[attr-defined]
