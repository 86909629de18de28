"""Fixture worlds: the directory format, https on loopback with URLs unchanged, routing."""

from __future__ import annotations

import asyncio
import shutil
import tomllib
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

import external_query_service.testing as testing
from external_query_service import (
    Adapter,
    ExternalQueryService,
    InputError,
    Settings,
    SettingsError,
    register_adapter,
)
from external_query_service.adapters._searxng import SearxngAdapter
from external_query_service.adapters.options import Endpoints
from external_query_service.net._fetch import SafeFetcher, TrustedEndpoint
from external_query_service.testing import (
    Reply,
    World,
    article,
    hit,
    json_reply,
    load_world,
    open_world,
    searx_body,
)
from external_query_service.testing.world_files import (
    PageEntry,
    SearchEntry,
    WorldInfo,
    WorldManifest,
    dump_toml,
    write_world,
)
from tests.support.cases import EXAMPLES
from tests.support.world import NOW

QUESTION = "2026年珠海航展有哪些新机型亮相？"
AIRSHOW = article(
    "珠海航展新机型集中亮相",
    [
        "第十六届中国航展11月在珠海开幕，多款新机型首次公开亮相，其中包括新型舰载预警机和"
        "大型无人运输机。",
        "主办方介绍，本届航展共有来自40多个国家和地区的参展商参加。",
    ],
    published="2026-11-12",
)


def test_testing_all_is_sorted_constants_then_classes_then_functions() -> None:
    def kind(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert testing.__all__ == sorted(testing.__all__, key=kind)
    assert all(hasattr(testing, name) for name in testing.__all__)


# -- settings: connect_to and ca_bundle --------------------------------------------------------


def test_connect_to_entries_are_normalized_and_checked() -> None:
    settings = Settings.from_mapping(
        {"network": {"connect_to": {"News.Example.:443": "127.0.0.1:8443"}}}
    )
    assert settings.network.connect_to == {"news.example:443": "127.0.0.1:8443"}
    for bad in ({"news.example": "127.0.0.1:1"}, {"a:443": "127.0.0.1:99999"}):
        with pytest.raises(SettingsError, match="connect_to"):
            Settings.from_mapping({"network": {"connect_to": bad}})


def test_relative_ca_bundle_resolves_against_the_settings_file(tmp_path: Path) -> None:
    config = tmp_path / "live.toml"
    config.write_text('[network]\nca_bundle = "certs/ca.pem"\n', encoding="utf-8")
    assert Settings.load(config).network.ca_bundle == tmp_path / "certs" / "ca.pem"


@pytest.mark.usefixtures("https_worlds")
def test_https_page_is_served_on_loopback_under_its_own_url() -> None:
    with World(now=NOW) as world:
        url = world.route("https://news.example.cn/airshow", Reply(body=AIRSHOW))
        settings = world.settings()

        async def fetch() -> str:
            fetcher = SafeFetcher(settings.network)
            try:
                page = await fetcher.fetch(url)
            finally:
                await fetcher.aclose()
            return f"{page.final_url} {page.connected_address} {page.status}"

        assert asyncio.run(fetch()) == f"{url} 127.0.0.1 200"
        assert settings.network.connect_to["news.example.cn:443"].startswith("127.0.0.1:")
        assert settings.network.ca_bundle is not None
        assert world.requests_to("/airshow", host="news.example.cn")[0].scheme == "https"


@pytest.mark.usefixtures("https_worlds")
def test_without_the_world_ca_the_certificate_is_refused() -> None:
    with World() as world:
        url = world.route("https://news.example.cn/a", Reply(body=AIRSHOW))
        network = world.settings().network.model_copy(update={"ca_bundle": None})

        async def fetch() -> str:
            fetcher = SafeFetcher(network)
            try:
                await fetcher.fetch(url)
            except Exception as exc:  # the reason is what matters here
                return getattr(exc, "reason", type(exc).__name__)
            finally:
                await fetcher.aclose()
            return "fetched"

        assert asyncio.run(fetch()) in {"connect_failed", "transport_error"}


@pytest.mark.usefixtures("https_worlds")
def test_connect_to_keeps_the_guard_on_for_the_mapped_address() -> None:
    with World() as world:
        url = world.route("https://news.example.cn/a", Reply(body=AIRSHOW))
        network = world.settings().network.model_copy(update={"allowed_networks": ()})

        async def fetch() -> str:
            fetcher = SafeFetcher(network)
            try:
                await fetcher.fetch(url)
            except Exception as exc:
                return getattr(exc, "reason", type(exc).__name__)
            finally:
                await fetcher.aclose()
            return "fetched"

        # Refused on the mapped address's port before any lookup: 127.0.0.1 is not public.
        assert asyncio.run(fetch()) in {"unsafe_url", "blocked_destination"}
        assert world.requests == []


@pytest.mark.usefixtures("https_worlds")
def test_routes_match_the_most_specific_query_subset() -> None:
    with World() as world:
        base = "https://api.frankfurter.dev/v1/latest"
        world.route(base, json_reply({"which": "any"}))
        world.route(f"{base}?from=USD&to=CNY", json_reply({"which": "usd"}))
        world.route(f"{base}?from=EUR", json_reply({"which": "eur"}))
        network = world.settings().network

        async def ask(params: dict[str, str | int]) -> object:
            endpoint = TrustedEndpoint("https://api.frankfurter.dev/v1", network)
            try:
                response = await endpoint.get_json("latest", params)
            finally:
                await endpoint.aclose()
            assert isinstance(response.data, dict)
            return response.data["which"]

        assert asyncio.run(ask({"to": "CNY", "from": "USD", "amount": 1})) == "usd"
        assert asyncio.run(ask({"from": "EUR", "to": "JPY"})) == "eur"
        assert asyncio.run(ask({"from": "GBP"})) == "any"


@pytest.mark.usefixtures("https_worlds")
def test_unknown_path_on_a_world_host_is_404_never_the_internet() -> None:
    with World() as world:
        world.claim("https://searx.example.org/")
        network = world.settings().network

        async def status() -> int:
            endpoint = TrustedEndpoint("https://searx.example.org", network)
            try:
                await endpoint.get_json("nothing-here")
            except Exception as exc:
                return int(getattr(exc, "status", 0))
            finally:
                await endpoint.aclose()
            return 200

        assert asyncio.run(status()) == 404


# -- the directory format -------------------------------------------------------------------


def test_example_world_loads_with_its_clock_adapters_and_files() -> None:
    spec = load_world(EXAMPLES / "worlds" / "zhanjiang-weather")
    assert spec.now is not None
    assert spec.now.isoformat() == "2026-11-30T10:00:00+08:00"
    assert {adapter["kind"] for adapter in spec.manifest.adapters} == {"open_meteo", "searxng"}
    assert b"24.1" in spec.files["api/forecast-2026-12-01.json"]


@pytest.mark.usefixtures("https_worlds")
def test_world_from_a_directory_answers_like_the_hand_built_one() -> None:
    semantics = {
        "query_kind": "weather",
        "location": "湛江",
        "time_range": {"start": "2026-12-01", "end": "2026-12-01"},
    }
    with (
        open_world(EXAMPLES / "worlds" / "zhanjiang-weather") as world,
        world.service() as service,
    ):
        answer = service.answer("湛江明天天气怎么样？", semantics)
    assert answer.status == "answered"
    assert answer.sources[0].url.startswith("https://api.open-meteo.com/v1/forecast?")
    assert answer.evidence[0].accessed_at == NOW


class MirrorEngine(SearxngAdapter):
    """A third-party SearXNG-compatible engine whose URL option has its own name."""

    kind: ClassVar[str] = "test_mirror_engine"

    class Options(Adapter.Options):
        instance: str | None = None

        @property
        def base_url(self) -> str | None:
            return self.instance

        def endpoints(self) -> Endpoints:
            return Endpoints({"instance": self.instance} if self.instance else {}, "instance")

    options: Options


@pytest.mark.usefixtures("https_worlds")
@pytest.mark.parametrize("kind", ["searxng", MirrorEngine.kind])
def test_a_search_engine_without_a_url_plays_at_the_worlds_own_host(
    tmp_path: Path, kind: str
) -> None:
    register_adapter(MirrorEngine.kind, MirrorEngine, replace=True)
    url = "https://airshow.example.cn/news"
    manifest = WorldManifest(
        world=WorldInfo(now=NOW),
        adapters=({"kind": kind, "id": "engine"},),
        search=(SearchEntry(query=QUESTION, results=(hit(url, "珠海航展", "新机型"),)),),
        pages=(PageEntry(url=url, file="pages/news.html"),),
    )
    write_world(tmp_path / "w", manifest, {"pages/news.html": AIRSHOW.encode("utf-8")})
    with open_world(tmp_path / "w") as world, world.service() as service:
        (engine,) = world.settings().adapters
        answer = service.answer(QUESTION)
    assert list(engine.option_values.values()) == ["https://searx.world.test"]
    assert len(world.requests_to("/search", host="searx.world.test")) == 1
    assert answer.status == "answered"
    assert [source.url for source in answer.sources] == [url]


def test_a_file_whose_digest_changed_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "w"
    (root / "pages").mkdir(parents=True)
    (root / "pages" / "a.html").write_text("<p>changed</p>", encoding="utf-8")
    (root / "world.toml").write_text(
        '[[pages]]\nurl = "https://a.example/"\nfile = "pages/a.html"\nsha256 = "sha256:00"\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="digest does not match"):
        load_world(root)


@pytest.mark.parametrize("name", ["../outside.html", "/etc/passwd"])
def test_a_file_outside_the_world_is_refused(tmp_path: Path, name: str) -> None:
    root = tmp_path / "w"
    root.mkdir()
    (root / "world.toml").write_text(
        f'[[pages]]\nurl = "https://a.example/"\nfile = "{name}"\n', encoding="utf-8"
    )
    with pytest.raises(InputError, match="relative path inside the world"):
        load_world(root)


def test_unknown_keys_in_a_world_are_errors(tmp_path: Path) -> None:
    (tmp_path / "world.toml").write_text('[world]\nnmae = "typo"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"world\.nmae: unknown key"):
        load_world(tmp_path)


def test_a_recorded_walk_with_more_fates_than_hits_is_refused(tmp_path: Path) -> None:
    (tmp_path / "world.toml").write_text(
        '[[walks]]\nadapter = "searx"\nhits = ["https://a.example/"]\n'
        'fates = ["read", "cut_off"]\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="at most one fate per hit"):
        load_world(tmp_path)


def test_a_world_without_recorded_walks_replays_by_the_walks_own_rules(tmp_path: Path) -> None:
    (tmp_path / "world.toml").write_text('[world]\nname = "w"\n', encoding="utf-8")
    assert load_world(tmp_path).recorded_walks() is None
    (tmp_path / "world.toml").write_text(
        '[[walks]]\nadapter = "searx"\nhits = ["https://a.example/"]\nfates = ["read"]\n',
        encoding="utf-8",
    )
    walks = load_world(tmp_path).recorded_walks()
    assert walks is not None
    assert walks.take("searx", ["https://a.example/"]) == ("read",)


def test_an_unknown_adapter_key_in_a_world_is_refused_at_load(tmp_path: Path) -> None:
    (tmp_path / "world.toml").write_text(
        '[[adapters]]\nkind = "open_meteo"\nid = "weather"\ngeocodeing_url = "https://g.test"\n',
        encoding="utf-8",
    )
    with pytest.raises(SettingsError) as caught:
        load_world(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'world.toml'}: adapter 'weather' (open_meteo): unknown key 'geocodeing_url'"
    )


def test_toml_writer_round_trips_through_tomllib() -> None:
    data = {
        "title": 'quote " backslash \\ tab \t del \x7f 中文',
        "count": 3,
        "ratio": 0.5,
        "flag": True,
        "world": {"now": "2026-11-30T10:00:00+08:00", "name": "w"},
        "pages": [{"url": "https://a.example/?q=湛江&x=1", "params": {"a b": "c"}}],
        "empty": {},
    }
    parsed = tomllib.loads(dump_toml(data))
    assert parsed == {k: v for k, v in data.items() if k != "empty"}


def test_edited_copy_of_a_world_serves_the_new_page(tmp_path: Path) -> None:
    root = tmp_path / "typhoon"
    shutil.copytree(EXAMPLES / "worlds" / "zhanjiang-typhoon", root)
    spec = load_world(root)
    assert [page.url for page in spec.manifest.pages] == ["https://news.example.cn/2025/typhoon"]


@pytest.mark.usefixtures("https_worlds")
def test_hand_built_world_supports_search_pages_and_fact_apis_at_once() -> None:
    with World(now=NOW) as world:
        page = world.route("https://news-a.example.cn/airshow", Reply(body=AIRSHOW))
        search = "https://searx.example.org/search?" + str(httpx.QueryParams({"q": QUESTION}))
        world.route(search, json_reply(searx_body(QUESTION, [hit(page, "珠海航展", "新机型")])))
        adapter = {"kind": "searxng", "id": "searx", "base_url": "https://searx.example.org"}
        with ExternalQueryService(world.settings(adapter), clock=world.clock) as service:
            answer = service.answer(QUESTION)
    assert answer.status == "answered"
    assert [source.url for source in answer.sources] == [page]
    assert answer.sources[0].site == "news-a.example.cn"


@pytest.mark.usefixtures("https_worlds")
def test_world_settings_resolve_every_site_to_loopback_with_the_guard_on() -> None:
    with open_world(EXAMPLES / "worlds" / "rust-release") as world:
        settings = world.settings()
    network = settings.network
    sites = {
        "searx.example.org",
        "blog.rust-lang.example",
        "devnews.example.com",
        "mirror.example.net",
    }
    assert network.resolve == dict.fromkeys(sites, "127.0.0.1")
    assert set(network.connect_to) == {f"{site}:443" for site in sites}
    # The guard stays on: loopback alone is admitted, nothing private besides it.
    assert [str(net) for net in network.allowed_networks] == ["127.0.0.1/32"]
    assert [(a.kind, a.base_url) for a in settings.adapters] == [
        ("searxng", "https://searx.example.org")
    ]


def test_world_settings_analyse_pages_in_a_thread_unless_processes_are_given() -> None:
    with World() as world:
        assert world.settings().analysis.processes == 0
        chosen = world.settings(analysis={"processes": 2, "page_cpu_s": 1.0}).analysis
        assert (chosen.processes, chosen.page_cpu_s) == (2, 1.0)
        world.sections["analysis"] = {"page_cpu_s": 2.0}  # a world's own section, no processes
        assert (world.settings().analysis.processes, world.settings().analysis.page_cpu_s) == (
            0,
            2.0,
        )
        world.sections["analysis"] = {"processes": 1}
        assert world.settings().analysis.processes == 1


@pytest.mark.usefixtures("https_worlds")
def test_a_redacted_credential_in_a_route_matches_a_request_without_it() -> None:
    with World() as world:
        world.route(
            "https://api.example.com/v1/data?city=zhanjiang&apikey=REDACTED",
            json_reply({"which": "recorded"}),
        )
        network = world.settings().network

        async def ask(params: dict[str, str | int]) -> int:
            endpoint = TrustedEndpoint("https://api.example.com/v1", network)
            try:
                await endpoint.get_json("data", params)
            except Exception as exc:
                return int(getattr(exc, "status", 0))
            finally:
                await endpoint.aclose()
            return 200

        assert asyncio.run(ask({"city": "zhanjiang"})) == 200
        assert asyncio.run(ask({"city": "zhanjiang", "apikey": "any"})) == 200
        assert asyncio.run(ask({"city": "beihai"})) == 404


def test_a_recorded_world_offers_its_semantics_for_the_recorded_question_only(
    tmp_path: Path,
) -> None:
    (tmp_path / "semantics.json").write_text('{"query_kind": "news"}', encoding="utf-8")
    (tmp_path / "world.toml").write_text(
        '[recorded]\nquestion = "湛江最近有台风吗？"\nsemantics_file = "semantics.json"\n',
        encoding="utf-8",
    )
    spec = load_world(tmp_path)
    assert spec.recorded_semantics("湛江最近有台风吗？") == {"query_kind": "news"}
    assert spec.recorded_semantics("另一个问题") is None
    with open_world(tmp_path) as world:
        assert world.spec is not None
        assert world.spec.root == tmp_path
    (tmp_path / "world.toml").write_text(
        '[recorded]\nquestion = "q"\nsemantics_file = "../semantics.json"\n', encoding="utf-8"
    )
    with pytest.raises(InputError, match="not a file inside the world"):
        load_world(tmp_path).recorded_semantics("q")


def test_the_keyed_search_urls_and_the_any_host_wildcard_come_from_the_package() -> None:
    from external_query_service import testing
    from external_query_service.testing import server, world

    assert (testing.BRAVE_URL, testing.TAVILY_URL) == (world.BRAVE_URL, world.TAVILY_URL)
    assert testing.BRAVE_URL.startswith("https://api.search.brave.com/")
    assert testing.ANY_HOST == server.ANY_HOST == "*"
    assert {"ANY_HOST", "BRAVE_URL", "TAVILY_URL"} <= set(testing.__all__)
