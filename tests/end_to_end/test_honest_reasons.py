"""Reasons that say what really happened: each case here once ended in a sentence that
misled a new user (a refusal when nothing was sent, "nothing found" when every page was
refused, "outside the time range" for a page with no date, a guess at what a status means).
Every provider is the loopback world speaking the provider's documented format."""

from __future__ import annotations

import json
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from external_query_service import ExternalQueryService, Settings, fixed_clock
from external_query_service.cli import main
from external_query_service.gateway._registry import known_kinds
from external_query_service.models import ExternalAnswer
from external_query_service.net._fetch import HttpRuntime
from external_query_service.testing import SEARX, LoopbackServer, Reply, World, json_reply
from external_query_service.testing.content import searx_body
from external_query_service.testing.world import open_world
from tests.support.paths import REPO
from tests.support.world import NOW, article, docs_folder, hit

ZH_QUESTION = "湛江港今年吞吐量是多少？"
EN_QUESTION = "What was the port of Zhanjiang's cargo throughput this year?"
PORT_TEXT = "湛江港今年货物吞吐量达到三亿吨，同比增长百分之五，港口集团在年度报告中公布了这一数字。"


#: A CommonMark backslash escape: the answer escapes outside text so it renders as text.
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def shown(answer: ExternalAnswer) -> str:
    """The answer's text as a Markdown reader sees it (backslash escapes resolved)."""
    return _ESCAPE.sub(r"\1", answer.text)


@pytest.fixture
def world(loopback: LoopbackServer) -> World:
    return World(loopback, now=NOW)


def ask(world: World, question: str, *adapters: dict[str, Any], **sections: Any) -> ExternalAnswer:
    semantics = sections.pop("semantics", None)
    settings = world.settings(*(adapters or (world.searxng(),)), **sections)
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        return service.answer(question, semantics)


def searx_origin(world: World) -> str:
    """The world's SearXNG as a reader must find it: host and port."""
    return world.base(SEARX).split("://", 1)[1].split("/", 1)[0]


# -- a provider key that is not set ---------------------------------------------------------


@pytest.mark.usefixtures("https_worlds")
def test_a_missing_provider_key_names_the_variable_and_sends_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    answer = ask(world, EN_QUESTION, world.brave(api_key_env="BRAVE_API_KEY"))

    assert (answer.status, answer.reason, answer.retryable) == (
        "insufficient_evidence",
        "provider_misconfigured",
        False,
    )
    assert answer.attempts[0].reason == "api_key_missing"
    assert "set the environment variable BRAVE_API_KEY" in shown(answer)
    assert "no request was sent" in shown(answer)
    assert "refused" not in shown(answer)
    assert world.requests == []  # nothing was sent


@pytest.mark.usefixtures("https_worlds")
def test_a_missing_key_in_chinese_names_the_variable_too(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    answer = ask(world, ZH_QUESTION, world.brave(api_key_env="BRAVE_API_KEY"))

    assert "请设置环境变量 BRAVE_API_KEY" in shown(answer)
    assert "拒绝" not in shown(answer)


# -- what a SearXNG status means ------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "meaning"),
    [
        (403, "HTTP 403: JSON output is disabled on this SearXNG instance"),
        (404, "HTTP 404: nothing answers at that path, so its base_url is wrong"),
        (400, "HTTP 400: it refuses a parameter of the request"),
    ],
)
def test_a_searxng_refusal_states_its_status_what_it_means_and_the_host_with_its_port(
    world: World, status: int, meaning: str
) -> None:
    world.server.route(
        f"{SEARX}/search", Reply(status, body="<h1>no</h1>", content_type="text/html")
    )
    answer = ask(world, EN_QUESTION)

    assert (answer.reason, answer.retryable) == ("provider_misconfigured", False)
    assert f"{searx_origin(world)} answered {meaning}" in shown(answer)
    assert "for example" not in shown(answer)  # no guessing
    assert answer.attempts[0].cause is not None
    assert answer.attempts[0].cause.status == status


def test_a_searxng_403_in_chinese_says_json_output_is_disabled(world: World) -> None:
    world.server.route(f"{SEARX}/search", Reply(403, body="Forbidden", content_type="text/html"))
    answer = ask(world, ZH_QUESTION)

    text = shown(answer)
    assert f"{searx_origin(world)} 返回 HTTP 403：这个 SearXNG 实例未开启 JSON 输出" in text
    assert "例如" not in text


@pytest.mark.usefixtures("https_worlds")
def test_a_keyed_api_refusing_the_key_names_the_variable_that_holds_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", "wrong-key")
    world.route(
        "https://api.search.brave.com/res/v1/web/search",
        json_reply({"type": "ErrorResponse"}, status=401),
    )
    answer = ask(world, EN_QUESTION, world.brave(api_key_env="BRAVE_API_KEY"))

    assert answer.reason == "provider_misconfigured"
    assert (
        "api.search.brave.com answered HTTP 401: it refused the key in the environment "
        "variable BRAVE_API_KEY" in shown(answer)
    )
    assert "wrong-key" not in answer.model_dump_json()


# -- a probe against an instance whose engines all failed -----------------------------------


def test_a_probe_is_not_ready_when_every_searxng_engine_is_unresponsive(world: World) -> None:
    body = searx_body("searxng", [])
    body["unresponsive_engines"] = [["google", "timeout"], ["bing", "CAPTCHA"]]
    world.server.route(f"{SEARX}/search", json_reply(body))
    with ExternalQueryService(world.settings(world.searxng()), clock=fixed_clock(NOW)) as service:
        probed = service.probe()["searx"]

    assert (probed.ready, probed.reason) == (False, "engines_unresponsive")


def test_a_probe_is_ready_when_some_engines_answer(world: World) -> None:
    body = searx_body("searxng", [hit("https://searxng.org/", "SearXNG", "a metasearch engine")])
    body["unresponsive_engines"] = [["google", "timeout"]]
    world.server.route(f"{SEARX}/search", json_reply(body))
    with ExternalQueryService(world.settings(world.searxng()), clock=fixed_clock(NOW)) as service:
        probed = service.probe()["searx"]

    assert probed.ready


# -- every result page failed for one cause -------------------------------------------------


def test_result_pages_all_refused_by_the_address_policy_are_filtered_out_with_their_hosts(
    world: World,
) -> None:
    # The search engine lists two intranet pages: their names resolve to private addresses
    # the network policy refuses.
    world.results(
        EN_QUESTION,
        [
            hit("http://wiki.corp.test/port", "Zhanjiang port throughput", "Throughput report"),
            hit("http://files.corp.test/port", "Zhanjiang port throughput", "Throughput file"),
        ],
    )
    private = {"wiki.corp.test": "10.20.0.5", "files.corp.test": "192.168.7.9"}
    answer = ask(world, EN_QUESTION, network={"resolve": private})

    assert (answer.status, answer.reason, answer.retryable) == (
        "insufficient_evidence",
        "filtered_out",
        False,
    )
    assert "the address policy refused every result page" in shown(answer)
    assert "wiki.corp.test, files.corp.test" in shown(answer)
    assert "[network] allowed_networks" in shown(answer)
    assert world.requests_to("/port") == []  # no page was fetched


def test_result_pages_whose_names_do_not_resolve_are_network_unavailable(world: World) -> None:
    world.results(
        EN_QUESTION,
        [
            hit("https://news.unresolved.test/port", "Zhanjiang", ""),
            hit("https://port.unresolved.test/report", "Zhanjiang", ""),
        ],
    )
    served = dict.fromkeys(world.sites, "127.0.0.1")

    async def resolver(host: str, port: int) -> list[str]:
        if host in served or host == "127.0.0.1":
            return ["127.0.0.1"]
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    settings = world.settings(world.searxng())
    http = HttpRuntime(settings.network, resolver=resolver)
    with ExternalQueryService(settings, clock=fixed_clock(NOW), http=http) as service:
        answer = service.answer(EN_QUESTION)

    assert (answer.status, answer.reason, answer.retryable) == (
        "insufficient_evidence",
        "network_unavailable",
        True,
    )
    assert "news.unresolved.test, port.unresolved.test" in shown(answer)
    assert "could not be resolved" in shown(answer)


def test_pages_failing_for_different_causes_still_read_as_nothing_matching(world: World) -> None:
    missing = world.page("gone.test", "/port", "not here", status=404)
    world.results(
        EN_QUESTION,
        [
            hit(missing, "Zhanjiang", ""),
            hit("http://wiki.corp.test/port", "Zhanjiang", ""),
        ],
    )
    answer = ask(world, EN_QUESTION, network={"resolve": {"wiki.corp.test": "10.20.0.5"}})

    assert answer.reason == "no_matching_evidence"


# -- an undated page under a time range -----------------------------------------------------


def undated_port_pages(world: World) -> None:
    page = article("湛江港吞吐量", [PORT_TEXT] * 3)  # no date anywhere
    urls = [world.page(site, "/port", page) for site in ("port-a.test", "port-b.test")]
    world.results(ZH_QUESTION, [hit(url, "湛江港吞吐量", "湛江港今年吞吐量") for url in urls])


def test_an_undated_page_under_a_time_range_is_undated_evidence(world: World) -> None:
    undated_port_pages(world)
    span = {"time_range": {"start": "2026-11-01", "end": "2026-11-30"}}
    answer = ask(world, ZH_QUESTION, semantics=span)

    assert (answer.status, answer.reason, answer.retryable) == (
        "insufficient_evidence",
        "undated_evidence",
        False,
    )
    assert "找到的证据没有标注日期" in shown(answer)
    assert "不在所问的时间范围内" not in shown(answer)  # not "outside": it has no date


def test_undated_evidence_in_english_says_it_has_no_date(world: World) -> None:
    undated_port_pages(world)
    span = {"time_range": {"start": "2026-11-01", "end": "2026-11-30"}}
    answer = ask(world, ZH_QUESTION, semantics=span, presenter={"language": "en"})

    assert "the evidence found carries no date" in shown(answer)
    assert "is outside the time range" not in shown(answer)


def test_undated_and_dated_outside_the_range_together_stay_out_of_time_range(
    world: World,
) -> None:
    undated = world.page("port-a.test", "/port", article("湛江港吞吐量", [PORT_TEXT] * 3))
    old = world.page(
        "port-b.test", "/port", article("湛江港吞吐量", [PORT_TEXT] * 3, published="2025-01-10")
    )
    world.results(
        ZH_QUESTION, [hit(url, "湛江港吞吐量", "湛江港今年吞吐量") for url in (undated, old)]
    )
    span = {"time_range": {"start": "2026-11-01", "end": "2026-11-30"}}
    answer = ask(world, ZH_QUESTION, semantics=span)

    assert answer.reason == "out_of_time_range"


# -- an adapter with no base_url ------------------------------------------------------------


def test_a_searxng_adapter_without_base_url_says_base_url_missing() -> None:
    settings = Settings.from_mapping({"adapters": [{"kind": "searxng", "id": "web"}]})
    with ExternalQueryService(settings, clock=fixed_clock(NOW)) as service:
        answer = service.answer(EN_QUESTION)

    assert (answer.status, answer.reason) == ("insufficient_evidence", "no_ready_provider")
    assert "web is not ready (base_url_missing: set base_url in its [[adapters]] table)" in (
        shown(answer)
    )


# -- lists of kinds -------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["ask", "x"], ["serve"]])
def test_no_data_source_lists_every_registered_kind(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    if command == ["serve"]:
        pytest.importorskip("fastapi")  # the server extra: serve checks it before its sources
    code = main(command)
    err = capsys.readouterr().err

    assert code == 2
    assert "no data source is configured" in err
    for kind in known_kinds():
        assert kind in err


# -- ledgers that cannot be used as configured ----------------------------------------------


def ask_with_ledger(
    tmp_path: Path, ledger: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """``ask`` a documentation question with ``[ledger]`` set to ``ledger`` (TOML lines)."""
    docs = docs_folder(tmp_path, {"verifier.md": "# Verifier\n\nThe verifier checks origin.\n"})
    config = tmp_path / "ledger.toml"
    config.write_text(f"[ledger]\n{ledger}\n", encoding="utf-8")
    code = main(
        ["ask", "What does the verifier check?", "--docs", str(docs), "--config", str(config)]
    )
    return code, capsys.readouterr().err


def test_an_unmigrated_postgres_ledger_is_an_input_error_naming_the_command(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = ask_with_ledger(tmp_path, f"url = {json.dumps(postgres_url)}", capsys)

    assert code == 2
    assert err.count("\n") == 1  # one line
    assert err.startswith("external-query: error: ledger_needs_migration: ")
    assert "run `external-query ledger migrate`" in err
    assert "internal error" not in err


def test_a_missing_postgres_extra_is_an_input_error_like_the_redis_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As if psycopg were not installed: importing it (or the backend needing it) fails.
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.setitem(sys.modules, "external_query_service.storage._postgres", None)
    code, err = ask_with_ledger(tmp_path, 'url = "postgresql://ledger@127.0.0.1:9/none"', capsys)

    assert code == 2
    assert err.count("\n") == 1
    assert "pip install 'external_query_service[postgres]'" in err
    assert "internal error" not in err


def test_a_ledger_path_in_a_missing_folder_is_refused_alike_by_ask_and_ledger_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-folder" / "ledger.sqlite3"
    said = f"{missing}: the folder {missing.parent} does not exist"

    code, err = ask_with_ledger(tmp_path, f"path = {json.dumps(str(missing))}", capsys)
    assert (code, err.count("\n")) == (2, 1)
    assert f"ledger_unavailable: {said}" in err
    assert not missing.parent.exists()  # nothing made silently

    code = main(["ledger", "verify", "--config", str(tmp_path / "ledger.toml")])
    assert code == 2
    assert f"ledger_unavailable: {said}" in capsys.readouterr().err


def test_ledger_verify_on_a_missing_file_says_so_in_the_same_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "ledger.sqlite3"
    code = main(["ledger", "verify", "--ledger", str(missing)])

    assert code == 2
    assert f"ledger_unavailable: {missing}: there is no ledger file there" in (
        capsys.readouterr().err
    )
    assert not missing.exists()


# -- a replay asked what it never recorded --------------------------------------------------

WEATHER_WORLD = REPO / "examples/cases/worlds/zhanjiang-weather"


@pytest.mark.usefixtures("https_worlds")
def test_a_replay_without_a_recording_for_the_search_names_the_request() -> None:
    with open_world(WEATHER_WORLD) as world, world.service() as service:
        answer = service.answer(EN_QUESTION, {"query_kind": "generic_web"})

    search = next(a for a in answer.attempts if a.adapter_id == "searx")
    assert search.reason == "not_recorded"
    assert search.cause is not None
    assert search.cause.request is not None
    assert search.cause.request.startswith("GET /search?")
    assert "the replayed world has no recording of this request to searx.example.org" in (
        shown(answer)
    )
    assert "GET /search?" in shown(answer)
    assert "refus" not in shown(answer)
    assert "base_url" not in shown(answer)


@pytest.mark.usefixtures("https_worlds")
def test_ask_with_world_says_the_question_was_not_recorded(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["ask", ZH_QUESTION, "--world", str(WEATHER_WORLD), "--kind", "generic_web"])
    out = capsys.readouterr().out

    assert code == 0
    assert "回放的世界没有录制发往 searx.example.org 的这次请求" in out
    assert "拒绝" not in out
