"""A question asked in parts: the answer quotes a passage for each part the passages cover,
searches again for a part none covers, and says which part is missing. The parts come from
the question's structure (a coordination the segmenter gives, or several question
sentences), never from a list of words. Against loopback worlds (a SearXNG and pages)."""

from __future__ import annotations

import re
from typing import Any

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service.testing import LoopbackServer, Reply
from tests.support.llm_chat import ChatServer, answer_json
from tests.support.world import NOW, World, article, hit

NETWORK = {"deadline_s": 60.0, "timeout_s": 20.0}
SALES = "2025年比亚迪和特斯拉的销量分别是多少？"
BYD = [
    "比亚迪公布2025年全年销量为427万辆，同比增长百分之四十一，继续位居国内第一。",
    "据比亚迪年报，2025年比亚迪新能源汽车销量427万辆，其中海外销量超过40万辆。",
    "比亚迪2025年销量427万辆，乘用车占绝大多数，商用车销量也有所增长。",
    "分析人士认为，比亚迪2025年销量427万辆得益于价格下探和车型丰富。",
]
TESLA = "特斯拉2025年全球交付约164万辆，较上一年略有下降，中国市场占比接近三成。"


def serve(world: World, question: str, texts: list[str], first: int = 1) -> list[str]:
    urls = [
        world.page(
            f"auto-{n}.test",
            "/story",
            article("汽车销量", [text], published="2026-01-10", site_name=f"站{n}"),
        )
        for n, text in enumerate(texts, start=first)
    ]
    world.results(question, [hit(url, "汽车销量", question) for url in urls])
    return urls


def ask(world: World, question: str = SALES) -> Any:
    settings = world.settings(world.searxng(), network=NETWORK)
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        return service.answer(question)


def test_a_question_in_parts_quotes_a_passage_for_each_part(loopback: LoopbackServer) -> None:
    world = World(loopback)
    serve(world, SALES, [*BYD, TESLA])

    answer = ask(world)

    assert answer.status == "answered"
    quoted = answer.text.split("来源：", 1)[0]
    assert "427万辆" in quoted
    assert "164万辆" in quoted
    assert answer.verifier.missing_parts == ()
    (check,) = [c for c in answer.verifier.checks if c.check == "parts"]
    assert check.passed
    # Each part's figure is its own: 比亚迪's 427万 and 特斯拉's 164万 do not disagree.
    assert answer.verifier.conflicts == ()


def test_a_part_no_passage_covers_is_searched_again_and_then_quoted(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    serve(world, SALES, BYD)
    serve(world, "2025年特斯拉的销量分别是多少？", [TESLA], first=9)

    answer = ask(world)

    (second,) = answer.audit.named("second_round")
    assert second.detail["queries"] == ["2025年特斯拉的销量分别是多少？"]
    assert second.detail["after"]["missing_parts"] == ["特斯拉"]
    assert "164万辆" in answer.text.split("来源：", 1)[0]
    assert answer.verifier.missing_parts == ()


def test_a_part_still_missing_after_the_second_round_is_named(loopback: LoopbackServer) -> None:
    world = World(loopback)
    serve(world, SALES, BYD)

    answer = ask(world)

    assert answer.status == "answered"
    assert answer.verifier.missing_parts == ("特斯拉",)
    assert "未找到回答「特斯拉」的来源。" in answer.text
    assert "427万辆" in answer.text


def test_a_model_written_summary_names_the_missing_part_too(
    loopback: LoopbackServer, chat: ChatServer
) -> None:
    world = World(loopback)
    serve(world, SALES, BYD)

    def writes(body: dict[str, Any]) -> Reply:
        prompt = "\n".join(message["content"] for message in body["messages"])
        cited = re.findall(r"ev-[0-9a-f]{12}", prompt)[:1]
        return answer_json({"text": f"比亚迪2025年销量427万辆 [{cited[0]}]。", "citations": cited})

    chat.then(writes, writes)
    settings = world.settings(world.searxng(), network=NETWORK)
    settings = settings.model_copy(update={"llm": chat.settings()})
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        answer = service.answer(SALES)

    render = answer.audit.named("render")[-1].detail
    assert render["renderer"] == "llm", render["fallback_reason"]
    assert "比亚迪2025年销量427万辆" in answer.text
    assert "未找到回答「特斯拉」的来源。" in answer.text
