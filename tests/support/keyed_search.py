"""The keyed search world: Brave and Tavily both list two port-news pages that answer one
question."""

from __future__ import annotations

from typing import Any

from external_query_service.testing import Reply, World
from external_query_service.testing.content import article, hit

#: The question both providers answer, the query they list the pages for, and its semantics.
QUESTION = "湛江港今年货物吞吐量是多少？"
QUERY = "湛江港 货物吞吐量"
SEMANTICS: dict[str, Any] = {
    "entities": ["湛江港"],
    "search_queries": [QUERY],
    "time_range": {"start": "2026-11-15", "end": "2026-11-30"},
}
#: The API keys the providers expect: no recorded or logged output may hold them.
BRAVE_KEY = "brv-KEY-7d1f0c55e2"
TAVILY_KEY = "tvly-KEY-93ab0e11c4"
#: The two sites with the answer, and the paragraph both print.
PORT_NEWS = "https://port-news.example.cn/throughput"
HARBOUR = "https://harbour.example.com/zhanjiang"
PARAGRAPH = "湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八，集装箱航线持续加密。"


def serve(world: World) -> None:
    """Two sites with the answer, and both providers listing them for QUERY."""
    world.route(
        PORT_NEWS, Reply(body=article("湛江港吞吐量创新高", [PARAGRAPH], published="2026-11-20"))
    )
    world.route(
        HARBOUR,
        Reply(body=article("湛江港集装箱航线", [PARAGRAPH], published="2026-11-18")),
    )
    hits = [
        hit(PORT_NEWS, "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"),
        hit(HARBOUR, "湛江港航线", "湛江港集装箱航线", "2026-11-18"),
    ]
    world.brave_results(QUERY, hits)
    world.tavily_results(QUERY, hits)
