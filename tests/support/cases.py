"""The shipped regression cases, and the change to one of their worlds that makes a case
fail."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import REPO

#: The shipped example suite: case files and the worlds they run in.
EXAMPLES = REPO / "examples" / "cases"

#: A recent typhoon report, which the stale-typhoon world lacks.
FRESH_PAGE = """<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8">
<title>台风“海燕”逼近湛江 - 南方新闻网</title>
<meta property="article:published_time" content="2026-11-28"></head><body>
<main><article><h1>台风“海燕”逼近湛江</h1><p class="byline">发布时间：2026-11-28</p>
<p>11月28日，今年第25号台风“海燕”在湛江市东南方向海面加强，预计11月29日夜间在湛江市沿海登陆，
湛江市已启动防台风二级应急响应，全市中小学停课。</p>
<p>湛江市气象台提醒市民，台风过境期间将有暴雨和十级以上大风，请减少外出并远离海边。</p>
</article></main></body></html>
"""


def support_an_answer(world: Path) -> None:
    """Give the stale-typhoon world a recent report, so the evidence now holds up. A later
    ``[[search]]`` for the same query replaces the earlier one."""
    (world / "pages" / "typhoon-2026.html").write_text(FRESH_PAGE, encoding="utf-8")
    with (world / "world.toml").open("a", encoding="utf-8") as manifest:
        manifest.write(
            """
[[search]]
query = "湛江最近有台风吗？"

[[search.results]]
url = "https://news.example.cn/2026/haiyan"
title = "台风逼近湛江"
content = "台风海燕逼近湛江"
publishedDate = "2026-11-28"

[[pages]]
url = "https://news.example.cn/2026/haiyan"
file = "pages/typhoon-2026.html"
"""
        )
