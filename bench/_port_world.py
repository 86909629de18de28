"""The port-throughput question that the latency and PDF benches ask, and the search engine
that serves it: some pages of their own ahead, then good article pages that answer."""

from __future__ import annotations

from external_query_service.testing import Reply, World, article, hit, json_reply, searx_body

QUESTION = "湛江港今年吞吐量是多少？"
ANSWER = "湛江港集团发布数据显示，今年前十个月湛江港货物吞吐量达到2.6亿吨，同比增长百分之八。"


def port_engine(world: World, name: str, ahead: list[str], good: int) -> dict[str, str]:
    """Engine ``name``'s adapter entry: it lists the ``ahead`` URLs (routed by the caller),
    then ``good`` article pages that answer ``QUESTION``."""
    hits = [hit(url, "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20") for url in ahead]
    for n in range(good):
        url = world.url(f"good{n}.{name}.test", "/port")
        body = article(f"湛江港吞吐量再创新高 {n}", [ANSWER], published="2026-11-20")
        world.route(url, Reply(body=body))
        hits.append(hit(url, "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"))
    base = world.url(f"search-{name}.test", "/searx")
    world.route(f"{base}/search", json_reply(searx_body(QUESTION, hits)))
    return {"kind": "searxng", "id": name, "base_url": base}
