"""Worlds the integration tests answer from: a local docs folder (offline, three admitted
documents) and a loopback news world (four sites, real HTTP, the guard on)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service.testing import World, article, hit

DOCS = Path(__file__).resolve().parent / "docs"
DOCS_QUESTION = "What does the verifier check?"
DOCS_SEMANTICS: dict[str, Any] = {"query_kind": "documentation"}

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=timezone(timedelta(hours=8)))
NEWS_QUESTION = "2026年珠海航展有哪些新机型亮相？"
#: Site → (title, paragraphs, published): four independent sources for one question.
NEWS_PAGES: dict[str, tuple[str, list[str], str]] = {
    "news-a.test": (
        "珠海航展新机型集中亮相",
        [
            "第十六届中国航展11月在珠海开幕，多款新机型首次公开亮相，其中包括新型舰载预警机和"
            "大型无人运输机。",
            "主办方介绍，本届航展共有来自40多个国家和地区的参展商参加。",
        ],
        "2026-11-12",
    ),
    "news-b.test": (
        "航展观察：无人机成为主角",
        [
            "在珠海航展现场，多型无人机成为关注焦点，新型无人运输机完成了首次飞行表演。",
            "业内人士认为，无人系统的集中展示体现了航空工业的新方向。",
        ],
        "2026-11-13",
    ),
    "news-c.test": (
        "珠海航展首日：新机型轮番登场",
        [
            "珠海航展首日，新型舰载预警机进行了静态展示，多款新机型吸引观众驻足。",
            "航展期间还将举行多场飞行表演和技术交流活动。",
        ],
        "2026-11-12",
    ),
    "news-d.test": (
        "珠海航展闭幕 新机型订单创纪录",
        [
            "为期六天的珠海航展闭幕，新机型签约订单数量创下历届纪录。",
            "多家航空企业表示，将继续加大新机型研发投入。",
        ],
        "2026-11-17",
    ),
}


def serve_news(world: World) -> list[str]:
    """Serve the four news pages and the search answer for ``NEWS_QUESTION``; their URLs."""
    urls = []
    hits = []
    for site, (title, paragraphs, published) in NEWS_PAGES.items():
        url = world.page(site, "/airshow", article(title, paragraphs, published=published))
        urls.append(url)
        hits.append(hit(url, title, paragraphs[0][:40], published))
    world.results(NEWS_QUESTION, hits)
    return urls


def news_service(world: World, **sections: Any) -> ExternalQueryService:
    """A service on the news world (searxng only) with the world's fixed "now"."""
    serve_news(world)
    return ExternalQueryService(world.settings(world.searxng(), **sections), clock=fixed_clock(NOW))


def docs_settings() -> Settings:
    return Settings().with_docs(DOCS)
