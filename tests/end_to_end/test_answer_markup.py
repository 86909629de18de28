"""Markup in a page never reaches the answer as markup: the whole chain over a loopback
world, the page spelling its payload with character references the way a hostile page
would (extraction decodes them into ``<img …>`` text)."""

from __future__ import annotations

import re

from tests.support.world import World, article, hit, make_service

PAYLOAD = "<img src=x onerror=alert(1)> <script>alert(2)</script>"


def test_a_page_spelling_markup_with_entities_is_quoted_as_text(world: World) -> None:
    question = "湛江港今年吞吐量是多少？"
    url = world.page(
        "port-x.test",
        "/report",
        # ``article`` escapes paragraphs, so the page carries ``&lt;img …&gt;``; the title
        # goes in as written, so it spells its entities itself.
        article(
            "湛江港吞吐量 &lt;b onmouseover=alert(3)&gt;报告&lt;/b&gt;",
            [
                f"湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八。{PAYLOAD}",
                "港口方面表示，湛江港吞吐量数据以本文为准，集装箱航线持续加密。",
            ],
        ),
    )
    world.results(question, [hit(url, "湛江港", "吞吐量")])
    with make_service(world, world.searxng()) as service:
        answer = service.answer(question, {"entities": ["湛江港"]})

    assert answer.status == "answered"
    assert any(PAYLOAD in item.snippet for item in answer.evidence)  # stored as extracted
    assert "<img" not in answer.text
    assert "<script" not in answer.text
    assert "&lt;script&gt;alert\\(2\\)&lt;/script&gt;" in answer.text
    assert "&lt;b onmouseover=alert\\(3\\)&gt;" in answer.text
    # No element can come out of a CommonMark render: raw HTML needs a literal "<", and
    # the only ones left open the Sources line's autolink (http/https, nothing inside).
    assert not re.search(r"[<>]", re.sub(r"<https?://[^\s<>]*>", "", answer.text))
