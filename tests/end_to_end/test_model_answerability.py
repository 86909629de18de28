"""A configured model judges answerability only with proof: it names the passage that
answers and quotes its answering words verbatim, code checks the quote, and "none answers"
ends ``insufficient_evidence``; a claim whose proof fails is ignored.

The question is asked with no ``query_semantics`` against a loopback search engine whose
results are article pages, one passage each, and the model is a loopback chat completions
endpoint. The passages are the same in every test: four mention the bridge, one states its
span, so without a model the answer quotes the span.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from external_query_service import ExternalAnswer
from external_query_service.testing import LoopbackServer, Reply, World, article, hit
from tests.support.llm_chat import ChatServer, answer_json
from tests.support.world import make_service

QUESTION = "蓝湾大桥的主跨长度是多少米？"
RELATED = (
    "蓝湾大桥位于滨海新区，是连接东西两岸的交通要道，每天有大量车辆从桥上通行。",
    "蓝湾大桥建成通车以后，两岸居民往来更加方便，周边的商业和旅游也随之发展起来。",
    "市交通部门表示，蓝湾大桥将在今年冬季进行例行检修，检修期间部分车道会临时封闭。",
    "蓝湾大桥的夜景灯光工程已经完工，每晚七点到十一点开放灯光秀，吸引很多市民拍照。",
)
SPAN = "设计资料显示，蓝湾大桥是一座双塔斜拉桥，主跨长度为680米，桥面宽33米，设计时速80公里。"
_BLOCK = re.compile(r"<<EVIDENCE-([0-9a-f]+)>>\n(.*?)\n<<END-EVIDENCE-\1>>", re.DOTALL)
_ID = re.compile(r"证据编号：(ev-[0-9a-f]+)")

#: The passages the prompt shows, by evidence id → its text; handed to a reply.
Passages = dict[str, str]


@pytest.fixture
def world(loopback: LoopbackServer) -> World:
    world = World(loopback)
    urls = [
        world.page(
            f"site{n}.test",
            "/a",
            article(f"滨海新区新闻{n}", [text], published="2026-11-29", site_name=f"新闻{n}"),
        )
        for n, text in enumerate((*RELATED, SPAN))
    ]
    world.results(QUESTION, [hit(url, "蓝湾大桥", "滨海新区") for url in urls])
    return world


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def passages(body: dict[str, Any]) -> Passages:
    prompt = "\n".join(message["content"] for message in body["messages"])
    found = {}
    for _token, block in _BLOCK.findall(prompt):
        evidence_id = _ID.search(block)
        assert evidence_id is not None
        found[evidence_id.group(1)] = block
    assert found
    return found


def holding(found: Passages, words: str) -> str:
    """The id of the passage whose text holds ``words``."""
    return next(eid for eid, text in found.items() if words in text)


def model(chat: ChatServer, write: Callable[[Passages], dict[str, Any]]) -> None:
    """The model's replies to one question: the planner's request gets no fields (the
    fallback plan's), the presenter's gets ``write(the passages its prompt shows)``."""

    def step(body: dict[str, Any]) -> Reply:
        if body["response_format"]["json_schema"]["name"] != "external_answer":
            return answer_json({})
        return answer_json(write(passages(body)))

    chat.then(step, step)


def ask(world: World, chat: ChatServer | None = None) -> ExternalAnswer:
    sections: dict[str, Any] = {"network": {"max_pages": 5}}
    if chat is not None:
        sections["llm"] = chat.settings()
    with make_service(world, world.searxng(), **sections) as service:
        return service.answer(QUESTION)


def judgment(answer: ExternalAnswer) -> Any:
    return answer.audit.named("render")[-1].detail["answerability"]


def answered_from(eid: str, quote: str) -> dict[str, Any]:
    return {
        "text": f"蓝湾大桥主跨长度为680米 [{eid}]。",
        "citations": [eid],
        "answered_by": [{"evidence_id": eid, "quote": quote}],
    }


def test_a_model_naming_the_passage_and_quoting_its_words_answers_from_it(
    world: World, chat: ChatServer
) -> None:
    model(chat, lambda found: answered_from(holding(found, "680米"), "主跨长度为680米"))
    answer = ask(world, chat)
    assert answer.status == "answered"
    assert answer.text.startswith("外部实时查询：蓝湾大桥主跨长度为680米 [")
    render = answer.audit.named("render")[-1].detail
    assert (render["renderer"], render["fallback_reason"]) == ("llm", None)
    span = next(item for item in answer.evidence if "680米" in item.snippet)
    assert judgment(answer) == {
        "verdict": "answered",
        "passages": [{"evidence_id": span.evidence_id, "quote": "主跨长度为680米"}],
        "detail": "",
    }


def test_a_model_saying_none_answers_ends_insufficient_evidence(
    world: World, chat: ChatServer
) -> None:
    without_model = ask(world)
    assert without_model.status == "answered"  # the lexical judgment finds the span
    why = "证据只介绍了大桥的位置和通车情况，没有说明主跨长度。"
    model(chat, lambda _found: {"text": why, "citations": [], "answered_by": []})
    answer = ask(world, chat)
    assert (answer.status, answer.reason, answer.retryable) == (
        "insufficient_evidence",
        "no_matching_evidence",
        False,
    )
    # Rendered as every refusal is, in the question's language, without sources.
    assert answer.text.startswith("外部实时查询：")
    assert "没有找到与问题对象相符的证据" in answer.text
    assert "680" not in answer.text
    assert why not in answer.text
    assert answer.sources == ()
    assert judgment(answer) == {"verdict": "none_answers", "passages": [], "detail": why}
    [event] = answer.audit.named("none_answers")
    assert event.detail["reason"] == "no_matching_evidence"


def test_a_model_saying_none_answers_is_audited_between_the_verdict_and_the_render(
    world: World, chat: ChatServer
) -> None:
    model(chat, lambda _found: {"text": "没有。", "citations": [], "answered_by": []})
    answer = ask(world, chat)
    tail = [(item.stage, item.event) for item in answer.audit.events][-4:]
    assert tail == [
        ("verifier", "outcome"),
        ("presenter", "none_answers"),
        ("presenter", "render"),
        ("service", "admission"),
    ]
    [event] = answer.audit.named("none_answers")
    assert list(event.detail) == ["status", "reason", "detail"]
    assert event.detail["status"] == "insufficient_evidence"


def test_a_model_quoting_words_the_passage_it_names_does_not_hold_is_ignored(
    world: World, chat: ChatServer
) -> None:
    extractive = ask(world)

    def claims_a_related_passage(found: Passages) -> dict[str, Any]:
        return answered_from(holding(found, "交通要道"), "主跨长度为680米")

    model(chat, claims_a_related_passage)
    answer = ask(world, chat)
    assert answer.status == "answered"
    assert answer.text == extractive.text
    render = answer.audit.named("render")[-1].detail
    assert render["renderer"] == "extractive"
    reason = str(render["fallback_reason"])
    assert reason.startswith("unproven_answer: 「主跨长度为680米」 is not in ev-")
    assert judgment(answer)["verdict"] == "unproven"


def test_a_model_naming_a_passage_the_packet_does_not_hold_is_ignored(
    world: World, chat: ChatServer
) -> None:
    extractive = ask(world)
    stranger = "ev-0123456789ab"
    model(chat, lambda _found: answered_from(stranger, "主跨长度为680米"))
    answer = ask(world, chat)
    assert answer.status == "answered"
    assert answer.text == extractive.text
    render = answer.audit.named("render")[-1].detail
    assert render["renderer"] == "extractive"
    assert render["fallback_reason"] == f"unproven_answer: '{stranger}' is not admitted evidence"
    assert judgment(answer)["verdict"] == "unproven"
