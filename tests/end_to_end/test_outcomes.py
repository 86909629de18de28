"""Honest outcomes end to end: each failure reason with its retryable flag and one sentence
naming the provider's host, and answers in the question's language."""

from __future__ import annotations

import json
import socket
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from external_query_service import ExternalQueryService, InvalidQuery, Settings, fixed_clock
from external_query_service.net._fetch import HttpRuntime
from external_query_service.testing import (
    SEARX,
    LoopbackServer,
    Reply,
    World,
    article,
    hit,
    json_reply,
)

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=timezone(timedelta(hours=8)))


@pytest.fixture
def world(loopback: LoopbackServer) -> World:
    return World(loopback, now=NOW)


def ask(world: World, question: str, semantics: Any = None, **sections: Any) -> Any:
    settings = world.settings(world.searxng(), **sections)
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        return service.answer(question, semantics)


def searx_host(world: World) -> str:
    host = world.base(SEARX).split("://", 1)[1].split("/", 1)[0]
    return host.rsplit(":", 1)[0]


@pytest.mark.parametrize(
    ("reply", "reason", "retryable", "sentence"),
    [
        (
            Reply(403, body="<h1>Forbidden</h1>", content_type="text/html"),
            "provider_misconfigured",
            False,
            "返回 HTTP 403：这个 SearXNG 实例未开启 JSON 输出",
        ),
        (
            Reply(400, body="bad language", content_type="text/plain"),
            "provider_misconfigured",
            False,
            "重试不会改变结果",
        ),
        (json_reply({"error": "down"}, status=502), "all_providers_failed", True, "暂时不可用"),
        (
            json_reply({"query": "q", "results": [], "unresponsive_engines": [["google", "x"]]}),
            "all_providers_failed",
            True,
            "可稍后重试",
        ),
    ],
)
def test_a_failing_search_backend_says_why_and_whether_to_retry(
    world: World, reply: Reply, reason: str, retryable: bool, sentence: str
) -> None:
    world.server.route(f"{SEARX}/search", reply)
    answer = ask(world, "湛江港今年吞吐量是多少？")

    assert (answer.status, answer.reason, answer.retryable) == (
        "insufficient_evidence",
        reason,
        retryable,
    )
    assert json.loads(answer.model_dump_json())["retryable"] is retryable
    assert sentence in answer.text
    assert searx_host(world) in answer.text  # the provider named by its host
    assert "searx" not in answer.text.replace(searx_host(world), "")  # never the adapter id


def test_no_name_resolving_anywhere_is_network_unavailable() -> None:
    async def offline(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    settings = Settings.from_mapping(
        {"adapters": [{"kind": "searxng", "base_url": "http://searx.offline.test:8080"}]}
    )
    http = HttpRuntime(settings.network, resolver=offline)
    with ExternalQueryService(settings, clock=fixed_clock(NOW), http=http) as service:
        answer = service.answer("What is the port's throughput this year?")

    assert (answer.reason, answer.retryable) == ("network_unavailable", True)
    assert answer.attempts[0].failure == "network"
    assert answer.text.startswith("External live query: ")
    assert "searx.offline.test:8080 could not be resolved" in answer.text  # host and port


def test_an_english_question_searches_in_english_and_reads_in_english(world: World) -> None:
    question = "When was Rust 1.0 released?"
    url = world.page(
        "rust-blog.test",
        "/1.0",
        article(
            "Announcing Rust 1.0",
            [
                "Rust 1.0 was released on May 15, 2015, after years of development.",
                "The release marked the start of the language's stability guarantees: code "
                "that compiles on Rust 1.0 keeps compiling on later 1.x releases.",
            ],
            published="2015-05-15",
        ),
    )
    world.results(question, [hit(url, "Announcing Rust 1.0", "Rust 1.0 was released")])
    answer = ask(world, question)

    assert answer.plan.language == "en"
    assert world.requests_to(f"{SEARX}/search")[0].query["language"] == ["en"]
    assert answer.status == "answered"
    assert answer.text.startswith("External live query: ")
    assert "Sources:" in answer.text
    assert "来源" not in answer.text


def test_a_regional_tag_reaches_the_search_unchanged(world: World) -> None:
    ask(world, "湛江港吞吐量", {"language": "zh-TW"})
    assert world.requests_to(f"{SEARX}/search")[0].query["language"] == ["zh-TW"]


def test_a_chinese_question_reads_in_chinese_unless_the_presenter_says_otherwise(
    world: World,
) -> None:
    chinese = ask(world, "湛江港今年吞吐量是多少？")
    assert chinese.text.startswith("外部实时查询：")
    assert world.requests_to(f"{SEARX}/search")[0].query["language"] == ["zh-CN"]

    english = ask(world, "湛江港今年吞吐量是多少？", presenter={"language": "en"})
    assert english.plan.language == "zh"
    assert english.text.startswith("External live query: ")


@pytest.mark.parametrize("tag", ["zh_CN", "english", "e", "en-", "x-private"])
def test_a_language_that_is_not_a_bcp47_tag_is_an_input_error(world: World, tag: str) -> None:
    with pytest.raises(InvalidQuery, match="not a BCP 47 language tag") as raised:
        ask(world, "问题", {"language": tag})
    assert raised.value.reason == "invalid_semantics"


def test_weather_without_a_location_asks_for_it_even_when_only_page_search_answers(
    world: World,
) -> None:
    # Pages for two cities come back; answering from whichever is first would be a guess.
    question = "明天天气怎么样？"
    urls = [
        world.page(
            f"{city}.test",
            "/forecast",
            article(
                f"{name}天气预报", [f"{name}明天多云转晴，最高气温24℃，最低气温18℃，东北风3级。"]
            ),
        )
        for city, name in (("zhanjiang", "湛江"), ("maoming", "茂名"))
    ]
    world.results(question, [hit(url, "天气预报", "明天天气") for url in urls])
    answer = ask(world, question, {"query_kind": "weather"})
    assert (answer.status, answer.reason) == ("clarify", "missing_slot")
    assert answer.verifier.missing_slots == ("location",)
    assert answer.sources == ()
    assert "地点" in answer.text
