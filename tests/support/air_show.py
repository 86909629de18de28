"""The air-show question and the worlds that answer it: a news page, a search engine slow
enough that concurrent questions overlap, and one whose first page is held back until a test
releases it."""

from __future__ import annotations

import threading
from typing import Any

from external_query_service import ExternalQueryService, Settings
from external_query_service.testing import (
    RecordedRequest,
    Reply,
    World,
    article,
    hit,
    json_reply,
    searx_body,
)

#: The question every air-show world answers, and a three-paragraph news page that answers it.
QUESTION = "Which new aircraft were shown at the air show?"
PAGE = article(
    "Air show news",
    [
        "New transport drones and a carrier-based early-warning aircraft were shown at the "
        "air show for the first time, with exhibitors from over forty countries.",
        "The new aircraft flew displays on each of the show's six days, and the organisers "
        "counted more than two hundred aircraft on the ground and in the air.",
        "Visitors queued to see the new early-warning aircraft up close on the last day.",
    ],
    lang="en",
)


def slow_world_settings(world: World, latency_ms: int, **network: Any) -> Settings:
    """A search engine that answers after ``latency_ms`` with one page about ``QUESTION``;
    ``network`` entries override the ``[network]`` section."""
    page = article(
        "Air show news",
        [
            "New transport drones and a carrier-based early-warning aircraft were shown at "
            "the air show for the first time, with exhibitors from over forty countries.",
        ],
        lang="en",
    )
    url = world.page("airshow.test", "/news", page)
    search = world.searxng()
    world.route(
        f"{search['base_url']}/search",
        json_reply(searx_body(QUESTION, [hit(url, "Air show news", "new aircraft")])),
        latency_ms=latency_ms,
    )
    # No response cache: each question here must really wait on the slow search.
    return world.settings(search, network=network, cache={"enabled": False})


class HeldPage:
    """A page the world serves only once ``release`` is set (then as ``reply``)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.release = threading.Event()
        self.served = threading.Event()

    def __call__(self, _request: RecordedRequest) -> Reply:
        self.release.wait(20)
        self.served.set()
        return self.reply


def held_world(
    world: World, held: HeldPage, *, hold_all: bool = False, **sections: Any
) -> ExternalQueryService:
    """A search with three hits: the first page held back, the other two plain (or held
    back too, with ``hold_all``)."""
    first = world.route(world.url("first.test", "/news"), held)
    others = [
        world.route(world.url(f"site{n}.test", "/news"), held)
        if hold_all
        else world.page(f"site{n}.test", "/news", PAGE)
        for n in (2, 3)
    ]
    search = world.searxng()
    hits = [hit(url, "Air show news", "new aircraft") for url in (first, *others)]
    world.route(f"{search['base_url']}/search", json_reply(searx_body(QUESTION, hits)))
    sections.setdefault("cache", {"enabled": False})
    return ExternalQueryService(world.settings(search, **sections))
