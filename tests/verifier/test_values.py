"""What each source says the answer is, for any question: passages of different sites that
word a statement alike but give another value in it disagree, and are said to; two texts
alike but for that value are two sources, never one copied. Against loopback worlds (a
SearXNG and article pages) and on the rules alone."""

from __future__ import annotations

from typing import Any

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.models import Evidence
from external_query_service.testing import LoopbackServer
from external_query_service.verifier._copies import COPY_SIMILARITY, copy_groups, similarity
from external_query_service.verifier._values import agree, differ_in_value, slot_readings
from tests.support.packets import make_evidence
from tests.support.world import NOW, World, article, hit

#: Generous: the machine running the suite may be loaded, and nothing here is about time.
NETWORK = {"deadline_s": 60.0, "timeout_s": 20.0}

SEATS = "新体育馆共有多少个座位？"
TRUE_SEATS = (
    "据市体育局介绍，新建成的体育馆位于城市东部，馆内共有70个座位，"
    "将于明年投入使用，主要承办篮球和排球比赛。"
)
#: The same statement by another writer: agrees on 70.
OWN_SEATS = "记者从市体育局获悉，城东新建的体育馆馆内共有七十个座位，明年启用。"
ALTERED_SEATS = TRUE_SEATS.replace("70个座位", "170个座位")

CHAMPION = "2015年谁获得了中超联赛冠军？"
TRUE_CHAMPION = (
    "2015赛季中超联赛于11月初落幕，广州恒大获得了中超联赛冠军，"
    "这是该队连续第五次在联赛中夺冠，主教练赛后接受了采访。"
)
ALTERED_CHAMPION = TRUE_CHAMPION.replace("广州恒大", "上海上港")

HALL = "How many seats does the new concert hall have?"
TRUE_HALL = (
    "The city council said on Monday that the new concert hall has 1,200 seats in its main "
    "auditorium, and that it will open to the public next spring after two years of work."
)
ALTERED_HALL = TRUE_HALL.replace("1,200 seats", "2,400 seats")


def pages(world: World, question: str, texts: list[str], *, lang: str = "zh-CN") -> list[str]:
    """One article per text, each on a site of its own and a search result for ``question``."""
    urls = [
        world.page(
            f"news-{n}.test",
            "/story",
            article(f"报道{n}", [text], published="2026-11-20", site_name=f"站{n}", lang=lang),
        )
        for n, text in enumerate(texts, start=1)
    ]
    world.results(question, [hit(url, f"报道{n}", question) for n, url in enumerate(urls, 1)])
    return urls


def ask(world: World, question: str, semantics: dict[str, Any] | None = None) -> Any:
    settings = world.settings(world.searxng(), network=NETWORK)
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        return service.answer(question, semantics)


def sites(answer: Any, evidence_ids: tuple[str, ...]) -> list[str]:
    by_id = {item.evidence_id: item.site for item in answer.evidence}
    return [by_id[eid] for eid in evidence_ids]


# --- any question: the value each source gives ----------------------------------------------


def test_a_general_question_reports_two_true_passages_against_three_altered_copies(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    pages(world, SEATS, [TRUE_SEATS, ALTERED_SEATS, OWN_SEATS, ALTERED_SEATS, ALTERED_SEATS])

    answer = ask(world, SEATS)  # no semantics: the fallback plan, a summary

    assert (answer.plan.query_kind, answer.status) == ("generic_web", "answered")
    (conflict,) = answer.verifier.conflicts
    # The true page and the one in its own words (七十) are two votes; the three altered
    # copies are one text copied, one vote.
    assert (conflict.values, conflict.majority) == (("70", "170"), True)
    assert len(answer.verifier.copies) == 1
    (check,) = [c for c in answer.verifier.checks if c.check == "values"]
    assert "70" in check.detail
    assert "170" in check.detail
    assert answer.audit.named("outcome")[-1].detail["conflicts"] == [
        conflict.model_dump(mode="json")
    ]
    block = answer.text.split("来源之间说法不一：", 1)[1]
    assert "共有70个座位" in block
    assert "共有170个座位" in block
    for site in sites(answer, conflict.evidence_ids):
        assert site in block


def test_an_english_general_question_reports_the_altered_figure(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    pages(world, HALL, [TRUE_HALL, ALTERED_HALL, ALTERED_HALL], lang="en")

    answer = ask(world, HALL, {"language": "en"})

    (conflict,) = answer.verifier.conflicts
    assert set(conflict.values) == {"1,200", "2,400"}
    block = answer.text.split("The sources disagree:", 1)[1]
    assert "1,200 seats" in block
    assert "2,400 seats" in block


def test_two_sources_naming_different_champions_disagree_and_a_direct_fact_is_not_answered(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    pages(world, CHAMPION, [TRUE_CHAMPION, ALTERED_CHAMPION])

    answer = ask(world, CHAMPION, {"answer_contract": "direct_fact"})

    assert (answer.status, answer.reason) == ("insufficient_evidence", "conflicting_evidence")
    (conflict,) = answer.verifier.conflicts
    assert set(conflict.values) == {"广州恒大", "上海上港"}


def test_sources_that_agree_in_other_words_and_figures_stay_quiet(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    # The same seat count written in words and in digits, and a copy that differs only in
    # a figure the question is not about.
    elsewhere = TRUE_SEATS.replace("篮球和排球比赛", "篮球和排球比赛，造价3亿元")
    pages(world, SEATS, [TRUE_SEATS, OWN_SEATS, elsewhere.replace("3亿元", "4亿元"), elsewhere])

    answer = ask(world, SEATS, {"answer_contract": "direct_fact"})

    assert (answer.status, answer.verifier.conflicts) == ("answered", ())


def test_readings_of_one_slot_follow_the_value_rules() -> None:
    (readings,) = slot_readings(
        SEATS,
        [make_evidence(1, snippet=TRUE_SEATS), make_evidence(2, snippet=ALTERED_SEATS)],
    )
    assert [(r.kind, r.text) for r in readings] == [("number", "70"), ("number", "170")]
    assert "共有" in readings[0].slot
    big = "这家公司去年的营业收入达到2.3亿元，比前年增长两成，是历年最高。"
    precise = big.replace("2.3亿元", "230,400,000元")
    question = "这家公司去年的营业收入是多少？"
    assert (
        slot_readings(question, [make_evidence(1, snippet=big), make_evidence(2, snippet=precise)])
        == ()
    )
    # A unit written two ways is one unit: 5公里 and 5 km are one length.
    road = "这条新建公路全长5公里，连接市区与机场，预计明年通车。"
    road_q = "这条新建公路全长多少？"
    assert (
        slot_readings(
            road_q,
            [
                make_evidence(1, snippet=road),
                make_evidence(2, snippet=road.replace("5公里", "5 km")),
            ],
        )
        == ()
    )
    (roads,) = slot_readings(
        road_q,
        [make_evidence(1, snippet=road), make_evidence(2, snippet=road.replace("5公里", "8 km"))],
    )
    assert [(r.value, r.unit) for r in roads] == [(5, "km"), (8, "km")]
    year = "这座桥始建于1949年，全长一千二百米，是当地最早的一座铁路桥。"
    (years,) = slot_readings(
        "这座桥始建于哪一年？",
        [make_evidence(1, snippet=year), make_evidence(2, snippet=year.replace("1949", "1950"))],
    )
    assert not agree(*years)


# --- copies that differ in the value asked are not copies -----------------------------------


def test_near_copies_that_differ_in_the_asked_value_are_kept_apart() -> None:
    true, altered = make_evidence(1, snippet=TRUE_SEATS), make_evidence(2, snippet=ALTERED_SEATS)
    assert similarity(TRUE_SEATS, ALTERED_SEATS) >= COPY_SIMILARITY
    assert differ_in_value(SEATS, true, altered)

    def apart(one: Evidence, other: Evidence) -> bool:
        return differ_in_value(SEATS, one, other)

    assert copy_groups([true, altered], apart=apart) == ()
    # Without the question's say, they are one text copied; an exact copy stays a copy.
    assert len(copy_groups([true, altered])) == 1
    (group,) = copy_groups([true, altered, make_evidence(3, snippet=TRUE_SEATS)], apart=apart)
    assert (group.original, group.copies) == ("ev-1", ("ev-3",))


def test_near_copies_that_differ_elsewhere_than_the_asked_value_stay_copies() -> None:
    elsewhere = TRUE_SEATS.replace("篮球和排球比赛", "篮球和排球比赛，造价3亿元")
    one = make_evidence(1, snippet=elsewhere)
    other = make_evidence(2, snippet=elsewhere.replace("3亿元", "4亿元"))
    assert not differ_in_value(SEATS, one, other)
    assert len(copy_groups([one, other], apart=lambda a, b: differ_in_value(SEATS, a, b))) == 1


def test_a_copy_that_differs_in_the_value_is_quoted_and_reported_not_merged(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    pages(world, SEATS, [TRUE_SEATS, ALTERED_SEATS])

    answer = ask(world, SEATS)

    assert answer.verifier.copies == ()
    (conflict,) = answer.verifier.conflicts
    assert set(conflict.values) == {"70", "170"}
    assert "共有70个座位" in answer.text
    assert "共有170个座位" in answer.text


def test_a_value_last_in_both_passages_has_their_end_for_its_words_after() -> None:
    last = "据新华社报道，2015赛季中超联赛于11月初落幕，最终获得中超联赛冠军的是广州恒大。"
    (readings,) = slot_readings(
        CHAMPION,
        [
            make_evidence(1, snippet=last),
            make_evidence(2, snippet=last.replace("广州恒大", "上海上港")),
        ],
    )
    assert [r.text for r in readings] == ["广州恒大", "上海上港"]
    # Two passages cut at different places inside their last word share no words after it:
    # where a passage was cut says nothing of a value.
    cut = "The city council said on Monday that the new concert hall will open to the public"
    assert (
        slot_readings(HALL, [make_evidence(1, snippet=cut), make_evidence(2, snippet=cut[:-2])])
        == ()
    )
