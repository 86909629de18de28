"""Sources that disagree are said, not hidden (a value, or the date of the event asked);
an article copied onto several sites is one source. Against loopback worlds: a SearXNG,
article pages, and a scripted chat endpoint."""

from __future__ import annotations

import re
import unicodedata
from datetime import date
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.models import (
    Evidence,
    ExternalQueryPlan,
    ValueConflict,
    VerifierResult,
)
from external_query_service.presenter._extractive import ExtractivePresenter
from external_query_service.testing import LoopbackServer, Reply
from external_query_service.verifier._conflicts import value_conflicts
from external_query_service.verifier._copies import (
    _SINGLE_DECOMPOSITIONS,
    _WORDS,
    COPY_SIMILARITY,
    _nfkc,
    _words,
    copy_groups,
    similarity,
)
from tests.support.llm_chat import ChatServer, answer_json, api_error
from tests.support.packets import make_evidence, make_packet
from tests.support.world import NOW, World, article, hit

QUESTION = "湛江12月1日天气怎么样？"
WEATHER = {
    "query_kind": "weather",
    "location": "湛江",
    "time_range": {"start": "2026-12-01", "end": "2026-12-01"},
}
#: Generous: the machine running the suite may be loaded, and nothing here is about time.
NETWORK = {"deadline_s": 60.0, "timeout_s": 20.0}
WARM = "湛江市气象台预计，12月1日湛江多云，最高气温24°C，东北风3级，空气质量良好。"
HOT = "据本地天气网站消息，湛江12月1日将以晴为主，白天最高温度可达31°C，请注意防晒补水。"


def two_forecasts(world: World) -> None:
    """Two weather pages for Zhanjiang on 2026-12-01: one says 24 °C, the other 31 °C."""
    warm = world.page(
        "weather-a.test", "/zj", article("湛江天气预报", [WARM], published="2026-11-30")
    )
    hot = world.page("weather-b.test", "/zj", article("湛江天气", [HOT], published="2026-11-30"))
    world.results(QUESTION, [hit(warm, "湛江天气预报", "湛江 24°C"), hit(hot, "湛江天气", "31°C")])


def ask(world: World, contract: str, *, language: str = "auto", **sections: Any) -> Any:
    settings = world.settings(
        world.searxng(), presenter={"language": language}, network=NETWORK, **sections
    )
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        return service.answer(QUESTION, {**WEATHER, "answer_contract": contract})


# --- conflicting values -----------------------------------------------------------------------


def test_two_forecasts_that_disagree_record_conflicting_values(loopback: LoopbackServer) -> None:
    world = World(loopback)
    two_forecasts(world)

    answer = ask(world, "summary_with_sources")

    (conflict,) = answer.verifier.conflicts
    by_id = {item.evidence_id: item for item in answer.evidence}
    assert conflict.kind == "conflicting_values"
    assert conflict.subject == "temperature"
    assert {
        by_id[eid].site: value
        for eid, value in zip(conflict.evidence_ids, conflict.values, strict=True)
    } == {
        "weather-a.test": "24 °C",
        "weather-b.test": "31 °C",
    }
    assert conflict.majority is False
    (check,) = [c for c in answer.verifier.checks if c.check == "values"]
    assert check.reason == "conflicting_values"
    assert check.passed
    outcome = answer.audit.named("outcome")[-1].detail
    assert outcome["conflicts"] == [conflict.model_dump(mode="json")]


def test_a_direct_fact_without_a_majority_is_conflicting_evidence(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    two_forecasts(world)

    answer = ask(world, "direct_fact")

    assert (answer.status, answer.reason, answer.retryable) == (
        "insufficient_evidence",
        "conflicting_evidence",
        False,
    )
    assert "来源之间对所问数值的说法不一致" in answer.text
    assert "24" not in answer.text
    assert "31" not in answer.text


def test_a_majority_of_independent_sources_answers_a_direct_fact(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    two_forecasts(world)
    third = world.page(
        "weather-c.test",
        "/zj",
        article(
            "湛江明日天气",
            ["湛江12月1日阴转多云，气温最高约24.5°C，夜间有轻雾。"],
            published="2026-11-30",
        ),
    )
    world.search[QUESTION] = [*world.search[QUESTION], hit(third, "湛江明日天气", "24.5°C")]

    answer = ask(world, "direct_fact")

    assert answer.status == "answered"
    (conflict,) = answer.verifier.conflicts
    assert conflict.majority is True
    assert conflict.values[1] == "31 °C"  # the minority's value is still named
    assert [by_site(answer, eid) for eid in conflict.dissenting] == ["weather-b.test"]
    quoted = answer.text.split("」", 1)[0]
    assert "31°C" not in quoted  # the answer quotes a page of the majority
    assert "24" in quoted


def by_site(answer: Any, evidence_id: str) -> str:
    return next(item.site for item in answer.evidence if item.evidence_id == evidence_id)


@pytest.mark.parametrize(
    ("language", "line"), [("zh", "来源之间说法不一："), ("en", "The sources disagree:")]
)
def test_a_summary_shows_both_quotes_under_a_line_saying_the_sources_disagree(
    loopback: LoopbackServer, language: str, line: str
) -> None:
    world = World(loopback)
    two_forecasts(world)

    answer = ask(world, "summary_with_sources", language=language)

    assert answer.status == "answered"
    block = answer.text.split(line, 1)[1]
    assert "24 °C" in block
    assert "31 °C" in block
    assert "最高气温24°C" in block
    assert "最高温度可达31°C" in block


def test_a_compare_answer_shows_the_disagreement_too(loopback: LoopbackServer) -> None:
    world = World(loopback)
    two_forecasts(world)
    settings = world.settings(world.searxng(), network=NETWORK)
    semantics = {**WEATHER, "location": None, "compare_targets": ["湛江"]}
    semantics["answer_contract"] = "compare_with_sources"
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        answer = service.answer(QUESTION, semantics)

    assert answer.status == "answered"
    assert answer.verifier.conflicts[0].target == "湛江"
    assert "来源之间说法不一：" in answer.text


def test_a_model_written_summary_carries_the_disagreement_block(
    loopback: LoopbackServer, chat: ChatServer
) -> None:
    world = World(loopback)
    two_forecasts(world)

    def writes(body: dict[str, Any]) -> Reply:
        prompt = "\n".join(message["content"] for message in body["messages"])
        cited = re.findall(r"ev-[0-9a-f]{12}", prompt)[:2]
        text = f"两家来源对12月1日湛江最高气温说法不同 [{cited[0]}][{cited[1]}]。"
        return answer_json({"text": text, "citations": cited})

    chat.then(writes, writes)
    settings = world.settings(world.searxng(), network=NETWORK)
    settings = settings.model_copy(update={"llm": chat.settings()})
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        answer = service.answer(QUESTION, {**WEATHER, "answer_contract": "summary_with_sources"})

    render = answer.audit.named("render")[-1].detail
    assert render["renderer"] == "llm", render["fallback_reason"]
    assert answer.text.startswith("外部实时查询：两家来源对12月1日湛江最高气温说法不同 [1][2]。")
    block = answer.text.split("来源之间说法不一：", 1)[1]
    assert "最高气温24°C" in block
    assert "最高温度可达31°C" in block


def test_a_high_and_low_pair_and_a_range_that_agree_are_one_opinion(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    pair = world.page(
        "weather-a.test",
        "/zj",
        article(
            "湛江天气预报", ["湛江12月1日多云，最高24℃最低18℃，东北风3级。"], published="2026-11-30"
        ),
    )
    span = world.page(
        "weather-b.test",
        "/zj",
        article("湛江天气", ["湛江12月1日阴，气温18至24℃，早晚有轻雾。"], published="2026-11-30"),
    )
    world.results(QUESTION, [hit(pair, "湛江天气预报", "湛江"), hit(span, "湛江天气", "湛江")])

    answer = ask(world, "direct_fact")

    assert (answer.status, answer.verifier.conflicts) == ("answered", ())
    assert not [check for check in answer.verifier.checks if check.check == "values"]


def weather_plan() -> ExternalQueryPlan:
    return ExternalQueryPlan(
        question=QUESTION, query_kind="weather", location="湛江", search_queries=(QUESTION,)
    )


def forecasts(*texts: str) -> list[tuple[Evidence, tuple[str, ...]]]:
    return [(make_evidence(n, snippet=text), ()) for n, text in enumerate(texts, start=1)]


@pytest.mark.parametrize(
    "texts",
    [
        ("最高24℃最低18℃", "气温18至24℃"),  # a high-low pair and a range
        ("气温18-24°C", "最低18度，最高24度"),  # a unit written two ways
        ("最高气温24°C。", "气温18至24℃"),  # a lone high inside the other's range
        ("24摄氏度", "24 ℃", "24°C"),
    ],
)
def test_readings_of_one_forecast_written_differently_do_not_disagree(
    texts: tuple[str, ...],
) -> None:
    assert value_conflicts(weather_plan(), forecasts(*texts)) == ()


def test_ranges_that_differ_at_one_end_disagree_and_are_named_as_ranges() -> None:
    (conflict,) = value_conflicts(weather_plan(), forecasts("气温18至24℃", "最低18℃，最高31℃"))
    assert conflict.values == ("18–24 °C", "18–31 °C")
    # A low in one sentence and a high in the next are two statements, not one range.
    (other,) = value_conflicts(weather_plan(), forecasts("最高31℃。夜间最低18℃。", "最高24℃"))
    assert other.values == ("31 °C", "24 °C")


# --- copies ---------------------------------------------------------------------------------

PORT = "湛江港吞吐量的问题？"
STORY = [
    "湛江港今年前十个月完成货物吞吐量2.3亿吨，同比增长百分之八，集装箱航线持续加密。",
    "港口集团表示，新建的30万吨级航道将在明年投入使用，进一步提升港口的通过能力。",
]
OTHER = ["湛江港务局统计显示，港口吞吐量今年保持增长，铁矿石与粮食进港量增加明显。"]


def syndicated(world: World, *, independent: bool) -> list[str]:
    """The same article on three sites (the earliest on copy-b), plus one independent page."""
    urls = [
        world.page(site, "/port", article("湛江港吞吐量创新高", STORY, published=day))
        for site, day in (
            ("copy-a.test", "2026-11-20"),
            ("copy-b.test", "2026-11-18"),
            ("copy-c.test", "2026-11-21"),
        )
    ]
    if independent:
        urls.append(
            world.page("own.test", "/port", article("港口吞吐量", OTHER, published="2026-11-25"))
        )
    world.results(PORT, [hit(url, "湛江港吞吐量", "湛江港吞吐量") for url in urls])
    return urls


def ask_port(world: World) -> Any:
    settings = world.settings(world.searxng(), verifier={"min_sources_summary": 2}, network=NETWORK)
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        return service.answer(PORT, {"query_kind": "news", "entities": ["湛江港"]})


def test_three_copies_and_one_independent_page_are_two_sources(loopback: LoopbackServer) -> None:
    world = World(loopback)
    a, b, c, _own = syndicated(world, independent=True)

    answer = ask_port(world)

    assert answer.status == "answered"
    url_of = {item.evidence_id: item.url for item in answer.evidence}
    (group,) = answer.verifier.copies
    assert url_of[group.original] == b  # the earliest published
    assert {url_of[copy] for copy in group.copies} == {a, c}
    (sources,) = [check for check in answer.verifier.checks if check.check == "sources"]
    assert sources.passed
    assert sources.detail.startswith("2 of 2 sites")
    copies_check = [check for check in answer.verifier.checks if check.check == "copies"]
    assert len(copies_check) == 1
    assert group.original in copies_check[0].detail
    assert answer.audit.named("outcome")[-1].detail["copies"] == [group.model_dump(mode="json")]
    # The source list shows the original with its copies as "also at", and the independent page.
    listing = answer.text.split("来源：", 1)[1]
    assert f"链接：<{b}>；另见：<" in listing
    assert a in listing
    assert c in listing
    assert [line[:3] for line in listing.strip().splitlines()] == ["1. ", "2. "]
    assert answer.text.count("前十个月完成货物吞吐量") == 1  # the copied text is quoted once


def test_three_copies_alone_do_not_make_two_sources(loopback: LoopbackServer) -> None:
    world = World(loopback)
    syndicated(world, independent=False)

    answer = ask_port(world)

    assert (answer.status, answer.reason) == ("insufficient_evidence", "insufficient_sources")
    assert len(answer.verifier.copies) == 1


def _page(n: int, text: str, published: date | None = None) -> Evidence:
    return Evidence(
        evidence_id=f"ev-{n:012x}",
        adapter_id="searx",
        provider_type="live_search",
        basis="page_body",
        url=f"https://site{n}.test/a",
        site=f"site{n}.test",
        snippet=text,
        score=9000 - n,
        published_at=published,
        accessed_at=NOW,
        content_digest="sha256:" + "0" * 64,
        raw_digest="sha256:" + "1" * 64,
    )


def test_copies_are_found_by_shingle_similarity_and_the_original_is_the_earliest() -> None:
    story = "".join(STORY)
    edited = story.replace("集装箱航线持续加密", "集装箱航线进一步加密")  # a syndicator's edit
    pages = [
        _page(1, story, date(2026, 11, 20)),
        _page(2, edited, date(2026, 11, 19)),
        _page(3, "".join(OTHER)),
        _page(4, story),  # undated: never the original while a dated copy exists
    ]

    (group,) = copy_groups(pages)

    assert similarity(story, edited) >= COPY_SIMILARITY
    assert similarity(story, "".join(OTHER)) < 0.2
    assert group.original == pages[1].evidence_id
    assert group.copies == (pages[0].evidence_id, pages[3].evidence_id)
    # The group's similarity is its least similar copy's to the original.
    assert group.similarity == round(similarity(edited, story), 3) < 1.0
    assert copy_groups([pages[0], pages[2]]) == ()
    # With the first ranked as the original, its copies' similarities are the ones measured
    # as they joined: the same figure.
    (first,) = copy_groups([pages[0], pages[1], pages[2]])
    assert first.original == pages[1].evidence_id
    assert first.similarity == round(similarity(story, edited), 3)
    (same,) = copy_groups([pages[0], pages[3]])
    assert (same.original, same.similarity) == (pages[0].evidence_id, 1.0)


_TEXT_CHARACTERS = st.sampled_from(
    [
        *"湛江港集装箱ａＢ１２abcIİßΣς",
        *"，：；！？（）　。、・",
        "\u0301",  # combining acute: composes with a preceding letter
        "\u0308",
        "\u3099",  # combining voiced mark: composes with kana
        "か",
        "\uf900",  # a CJK compatibility ideograph
        "\u2460",  # circled digit one
        "\ufb01",  # the fi ligature
        "\u00a0",
        " ",
        "_",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXT_CHARACTERS, max_size=60).map("".join))
def test_the_cheaper_normalization_and_word_split_are_nfkc_and_the_word_pattern(
    text: str,
) -> None:
    assert _nfkc(text) == unicodedata.normalize("NFKC", text)
    folded = unicodedata.normalize("NFKC", text).casefold()
    assert _words(folded) == _WORDS.findall(folded)


def test_the_characters_replaced_before_nfkc_each_decompose_to_one_character() -> None:
    assert len(_SINGLE_DECOMPOSITIONS) == 8
    for char, plain in _SINGLE_DECOMPOSITIONS:
        assert unicodedata.normalize("NFKD", char) == plain != char
    assert _nfkc("港口，吞吐量：（增长）") == "港口,吞吐量:(增长)"


def test_an_answered_direct_fact_quotes_the_majority_not_a_better_ranked_dissent() -> None:
    hot = make_evidence(1, snippet=HOT, score=9900)
    warm = make_evidence(2, snippet=WARM, score=8000)
    mild = make_evidence(3, snippet="湛江12月1日最高约24.5°C。", score=7000)
    conflict = ValueConflict(
        subject="temperature",
        evidence_ids=(warm.evidence_id, hot.evidence_id),
        values=("24 °C", "31 °C"),
        majority=True,
        dissenting=(hot.evidence_id,),
    )
    verdict = VerifierResult(status="answered", conflicts=(conflict,))
    packet = make_packet((hot, warm, mild), contract="direct_fact", verifier=verdict)

    text = ExtractivePresenter().present(packet).text

    assert "最高气温24°C" in text
    assert "31°C" not in text


# --- two dates for one event ------------------------------------------------------------------

RELEASE = "When was Rust 1.80 released?"
#: The plan says the value asked is the event's date; nothing reads the question's words.
EVENT = {"entities": ["Rust 1.80"], "asked_value": "event_date", "language": "en"}
ON_THE_25TH = (
    "Rust 1.80 was released on July 25, 2024, and it stabilizes LazyCell and LazyLock for "
    "lazily initialised statics."
)
#: The 25th again, in words of its own (not a copy of the first).
AGAIN_THE_25TH = (
    "Version 1.80 of Rust shipped to stable on 25 July 2024; exclusive range patterns and "
    "checked cfg names arrived in the same release."
)
ON_THE_18TH = (
    "Rust 1.80 came out on 18 July 2024 with LazyCell and LazyLock, which make lazily "
    "initialised statics possible without extra crates."
)


def release_pages(world: World, *pages: tuple[str, str, str]) -> dict[str, str]:
    """One article per ``(site, text, published)``, each a search result for ``RELEASE``;
    returns each page's URL by site."""
    urls = {
        site: world.page(
            site,
            "/rust-1-80",
            article("Rust 1.80", [text], published=published, site_name=site, lang="en"),
        )
        for site, text, published in pages
    }
    world.results(RELEASE, [hit(url, "Rust 1.80", "Rust 1.80 release") for url in urls.values()])
    return urls


def ask_release(world: World, contract: str, **fields: Any) -> Any:
    settings = world.settings(world.searxng(), network=NETWORK)
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        return service.answer(RELEASE, {**EVENT, "answer_contract": contract, **fields})


def two_release_dates(world: World) -> None:
    """Two sites, each its own article written after the release, giving different days."""
    release_pages(
        world,
        ("blog.test", ON_THE_25TH, "2024-07-27"),
        ("devnews.test", ON_THE_18TH, "2024-07-26"),
    )


def test_two_dates_for_the_event_asked_are_conflicting_values(loopback: LoopbackServer) -> None:
    world = World(loopback)
    two_release_dates(world)

    answer = ask_release(world, "summary_with_sources")

    assert answer.plan.asked_value == "event_date"
    assert answer.status == "answered"
    (conflict,) = answer.verifier.conflicts
    assert conflict.subject == "event_date"
    assert conflict.majority is False
    assert {
        by_site(answer, eid): value
        for eid, value in zip(conflict.evidence_ids, conflict.values, strict=True)
    } == {"blog.test": "2024-07-25", "devnews.test": "2024-07-18"}
    (check,) = [c for c in answer.verifier.checks if c.check == "values"]
    assert "event_date 2024-07-" in check.detail
    block = answer.text.split("The sources disagree:", 1)[1]
    assert "released on July 25, 2024" in block
    assert "came out on 18 July 2024" in block


def test_a_direct_fact_about_an_event_with_two_dates_is_conflicting_evidence(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    two_release_dates(world)

    answer = ask_release(world, "direct_fact")

    assert (answer.status, answer.reason, answer.retryable) == (
        "insufficient_evidence",
        "conflicting_evidence",
        False,
    )
    assert len(answer.verifier.conflicts) == 1


def test_a_majority_of_sites_settles_the_event_date(loopback: LoopbackServer) -> None:
    world = World(loopback)
    release_pages(
        world,
        ("blog.test", ON_THE_25TH, "2024-07-27"),
        ("devnews.test", ON_THE_18TH, "2024-07-26"),
        ("weekly.test", AGAIN_THE_25TH, "2024-07-29"),
    )

    answer = ask_release(world, "direct_fact")

    assert answer.status == "answered"
    (conflict,) = answer.verifier.conflicts
    assert conflict.majority is True
    assert conflict.values == ("2024-07-25", "2024-07-18")
    assert [by_site(answer, eid) for eid in conflict.dissenting] == ["devnews.test"]


def test_publication_dates_are_not_the_event_date(loopback: LoopbackServer) -> None:
    # Each page carries its own byline date (the 26th, the 29th); both give the 25th.
    world = World(loopback)
    release_pages(
        world,
        ("blog.test", ON_THE_25TH, "2024-07-26"),
        ("weekly.test", AGAIN_THE_25TH, "2024-07-29"),
    )

    answer = ask_release(world, "direct_fact")

    assert answer.status == "answered"
    assert answer.verifier.conflicts == ()


def test_without_the_plan_saying_so_dates_are_never_compared(loopback: LoopbackServer) -> None:
    world = World(loopback)
    two_release_dates(world)

    answer = ask_release(world, "direct_fact", asked_value=None)

    assert answer.plan.asked_value is None  # the conservative default
    assert answer.status == "answered"
    assert answer.verifier.conflicts == ()


def test_a_model_planner_that_says_the_event_date_is_asked_finds_the_two_dates(
    loopback: LoopbackServer, chat: ChatServer
) -> None:
    world = World(loopback)
    two_release_dates(world)
    proposal = {
        "query_kind": "news",
        "answer_contract": "summary_with_sources",
        "entities": ["Rust 1.80"],
        "language": "en",
        "search_queries": [RELEASE],
        "asked_value": "event_date",
    }
    # The model plans; its answer fails, so the extractive presenter writes.
    chat.then(answer_json(proposal), api_error(500, "model crashed", "api_error"))
    settings = world.settings(world.searxng(), network=NETWORK)
    settings = settings.model_copy(update={"llm": chat.settings()})
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        answer = service.answer(RELEASE)

    assert (answer.plan.planner_source, answer.plan.asked_value) == ("structured", "event_date")
    (conflict,) = answer.verifier.conflicts
    assert (conflict.subject, set(conflict.values)) == ("event_date", {"2024-07-25", "2024-07-18"})
    assert "The sources disagree:" in answer.text


def test_a_text_naming_two_dates_gives_no_event_date() -> None:
    plan = ExternalQueryPlan(question=RELEASE, search_queries=(RELEASE,), **EVENT)
    one = make_evidence(1, snippet=ON_THE_25TH)
    both = make_evidence(
        2, snippet="The Rust 1.80 beta shipped on June 13, 2024 and 1.80 on July 18, 2024."
    )
    plain = make_evidence(3, snippet=ON_THE_18TH)

    assert value_conflicts(plan, [(one, ()), (both, ())]) == ()
    (conflict,) = value_conflicts(plan, [(one, ()), (plain, ())])
    assert conflict.values == ("2024-07-25", "2024-07-18")
    # Published on the day it names, a page's one date cannot be told from its dateline.
    dateline = make_evidence(4, snippet=ON_THE_18TH, published_at=date(2024, 7, 18))
    assert value_conflicts(plan, [(one, ()), (dateline, ())]) == ()
