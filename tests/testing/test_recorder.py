"""Record against "live" providers (a loopback world behind a live config), then replay.

The recording path is the same code a real recording runs; only the providers are local.
"""

from __future__ import annotations

import contextlib
import io
import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

import httpx
import pytest

from external_query_service import InputError, register_adapter
from external_query_service.adapters.options import Endpoints
from external_query_service.cli import main
from external_query_service.errors import (
    ContentTooLarge,
    FetchDeadlineExceeded,
    FetchError,
    TooManyRedirects,
)
from external_query_service.models import ExternalAnswer
from external_query_service.settings import Settings
from external_query_service.testing import (
    Reply,
    World,
    article,
    comparable_answer,
    hit,
    json_reply,
    load_world,
    open_world,
    record_world,
    searx_body,
)
from external_query_service.testing._recorder import NothingAnswered, Recording, RecordResult
from external_query_service.testing.world_files import dump_toml
from tests.support.quote_adapter import QuoteAdapter
from tests.support.world import NOW, ZHANJIANG, closed_port, forecast_reply

QUESTION = "湛江港今年吞吐量是多少？"
SEMANTICS = {"entities": ["湛江港"], "time_range": {"start": "2026-11-01", "end": "2026-11-30"}}
SEARX = "https://searx.example.org"
LLM_KEY = "sk-live-LLMSECRET-000111"
OPTION_SECRET = "OPTIONSECRET456"
ENV_TOKEN = "envtoken-SECRET-789"
URL_SECRET = "SEARXSECRET123"
SECRETS = (LLM_KEY, OPTION_SECRET, ENV_TOKEN, URL_SECRET)
QUOTES = "https://quotes.example.net/api"
QUOTE_QUESTION = "贵州茅台最新收盘价？"
QUOTE_SEMANTICS = {
    "query_kind": "stock_quote",
    "entities": ["600519"],
    "time_range": {"start": "2026-11-27", "end": "2026-11-27"},
}


class RecordedQuotes(QuoteAdapter):
    """A third-party fact API with credentials. It takes part in recordings and worlds
    through its options' ``endpoints()``: a world serves that origin, a recording keeps only
    that URL."""

    kind: ClassVar[str] = "test_recorded_quotes"

    class Options(QuoteAdapter.Options):
        #: Credentials stay in the live settings; a replay runs without them.
        api_key: str | None = None
        token_env: str | None = None

        def endpoints(self) -> Endpoints:
            return Endpoints({"base_url": self.base_url})

    options: Options


@pytest.fixture(scope="module", autouse=True)
def quotes_registered() -> None:
    register_adapter(RecordedQuotes.kind, RecordedQuotes, replace=True)


@contextlib.contextmanager
def live_world() -> Iterator[World]:
    """The "real" providers: a search engine, three sites, Open-Meteo."""
    with World() as world:
        moved = "https://news-a.example.cn/2026/port"
        world.route(
            "https://news-a.example.cn/port",
            Reply(status=301, content_type=None, headers={"Location": moved}),
        )
        world.route(
            moved,
            Reply(
                body=article(
                    "湛江港吞吐量再创新高",
                    [
                        "湛江港集团发布数据显示，今年前十个月湛江港货物吞吐量达到2.6亿吨，同比增长百分之八。"
                    ],
                    published="2026-11-20",
                )
            ),
        )
        gbk = article(
            "湛江港集装箱航线加密",
            ["湛江港今年新开集装箱航线六条，前十个月集装箱吞吐量同比增长百分之十二。"],
            published="2026-11-18",
            charset_meta=False,
        ).encode("gbk", errors="xmlcharrefreplace")
        world.route("http://port.example.cn/news", Reply(body=gbk, content_type="text/html"))
        world.route("https://gone.example.com/x", Reply(status=404, body=b"gone"))
        hits = [
            hit("https://news-a.example.cn/port", "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20"),
            hit("http://port.example.cn/news", "湛江港航线", "湛江港集装箱航线", "2026-11-18"),
            hit("https://gone.example.com/x", "湛江港旧闻", "湛江港吞吐量旧闻", "2026-11-10"),
        ]
        world.route(
            f"{SEARX}/search?" + str(httpx.QueryParams({"q": QUESTION})),
            json_reply(searx_body(QUESTION, hits)),
        )
        # A provider that echoes credentials back (debug data): the recording keeps the
        # body with them scrubbed out.
        world.route(
            "https://geocoding-api.open-meteo.com/v1/search",
            json_reply({"results": [ZHANJIANG], "debug": f"{ENV_TOKEN} {OPTION_SECRET}"}),
        )
        world.route("https://api.open-meteo.com/v1/forecast", forecast_reply)
        quote = json_reply({"price": 1688.5, "date": "2026-11-27"})
        world.route(f"{QUOTES}/quote?symbol=600519", quote)
        yield world


@pytest.fixture
def live(https_worlds: None) -> Iterator[World]:
    with live_world() as world:
        yield world


def live_config(world: World, folder: Path) -> Path:
    """A live settings file with secrets in every place one could hide."""
    network = world.settings({"kind": "searxng", "base_url": SEARX}, {"kind": "open_meteo"}).network
    connect = ", ".join(f'"{k}" = "{v}"' for k, v in network.connect_to.items())
    path = folder / "live.toml"
    path.write_text(
        f"""
[network]
allowed_networks = ["127.0.0.1/32"]
connect_to = {{ {connect} }}
ca_bundle = "{network.ca_bundle}"

[[adapters]]
kind = "searxng"
id = "searx"
base_url = "{SEARX}/?apikey={URL_SECRET}"

[[adapters]]
kind = "open_meteo"
id = "weather"

[[adapters]]
kind = "{RecordedQuotes.kind}"
id = "quotes"
base_url = "{QUOTES}"
api_key = "{OPTION_SECRET}"
token_env = "EQS_TEST_TOKEN"

[llm]
base_url = "http://127.0.0.1:9/v1"
model = "some-model"
api_key_env = "EQS_TEST_LLM_KEY"
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory, quotes_registered: None, https_worlds: None
) -> Path:
    """One recording (through the CLI) that the read-only tests below share."""
    folder = tmp_path_factory.mktemp("record")
    semantics = folder / "semantics.json"
    semantics.write_text(json.dumps(SEMANTICS, ensure_ascii=False), encoding="utf-8")
    out = folder / "world"
    stdout, stderr = io.StringIO(), io.StringIO()
    with (
        live_world() as live,
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
    ):
        patch.setenv("EQS_TEST_LLM_KEY", LLM_KEY)
        patch.setenv("EQS_TEST_TOKEN", ENV_TOKEN)
        code = main(
            [
                "record",
                QUESTION,
                "--config",
                str(live_config(live, folder)),
                "--semantics-json",
                str(semantics),
                "--now",
                NOW.isoformat(),
                "--out",
                str(out),
            ]
        )
    # The "live" providers are gone: nothing may reach them from here on.
    assert code == 0, stderr.getvalue()
    assert "recorded" in stdout.getvalue()
    return out


def replay(directory: Path) -> ExternalAnswer:
    with open_world(directory) as world, world.service() as service:
        return service.answer(QUESTION, SEMANTICS)


def test_replay_of_a_recorded_world_gives_an_identical_answer_twice(recorded: Path) -> None:
    first, second = replay(recorded), replay(recorded)
    assert first.status == "answered"
    assert comparable_answer(first) == comparable_answer(second)


@pytest.mark.usefixtures("https_worlds")
def test_replay_reproduces_the_recorded_answer_exactly(recorded: Path) -> None:
    original = ExternalAnswer.model_validate_json((recorded / "answer.json").read_text("utf-8"))
    again = replay(recorded)
    assert comparable_answer(again, same_envelope=False) == comparable_answer(
        original, same_envelope=False
    )
    # Replay runs under a loopback envelope, so only the ids that hash it differ.
    assert again.admission.request_id == original.admission.request_id
    assert len(again.admission.plan_ids) == len(original.admission.plan_ids)
    assert [s.url for s in again.sources] == [s.url for s in original.sources]
    assert [(e.evidence_id, e.content_digest, e.raw_digest) for e in again.evidence] == [
        (e.evidence_id, e.content_digest, e.raw_digest) for e in original.evidence
    ]
    assert "https://news-a.example.cn/2026/port" in {s.url for s in again.sources}
    assert any("集装箱航线" in item.snippet for item in again.evidence)  # GBK survived


def test_no_secret_from_the_live_config_appears_in_the_recorded_world(recorded: Path) -> None:
    written = [path for path in recorded.rglob("*") if path.is_file()]
    assert {"world.toml", "answer.json", "semantics.json"} <= {path.name for path in written}
    for path in written:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, (path.name, secret)
            assert quote(secret, safe="").encode() not in data, (path.name, secret)
    manifest = (recorded / "world.toml").read_text("utf-8")
    assert "[llm]" not in manifest
    assert "api_key" not in manifest
    assert "token_env" not in manifest


def test_recorded_world_has_bodies_with_digests_and_the_failures(recorded: Path) -> None:
    spec = load_world(recorded)  # also re-checks every digest
    manifest = spec.manifest
    assert [entry.query for entry in manifest.search] == [QUESTION]
    pages = {page.url: page for page in manifest.pages}
    assert pages["https://news-a.example.cn/port"].redirect_to == (
        "https://news-a.example.cn/2026/port"
    )
    assert pages["https://gone.example.com/x"].status == 404
    assert pages["http://port.example.cn/news"].content_type == "text/html"
    assert all(page.sha256 for page in manifest.pages if page.file)
    assert manifest.world.now == NOW
    assert manifest.recorded is not None
    assert manifest.recorded.status == "answered"


@pytest.mark.parametrize("semantics_flag", [True, False], ids=["explicit", "recorded"])
def test_ask_with_world_replays_from_the_command_line(
    recorded: Path, capsys: pytest.CaptureFixture[str], semantics_flag: bool
) -> None:
    # Without semantics flags the recorded question replays with its recorded semantics.
    flags = ["--semantics-json", str(recorded / "semantics.json")] if semantics_flag else []
    code = main(["ask", QUESTION, "--world", str(recorded), *flags, "--format", "json"])
    out = capsys.readouterr().out
    assert code == 0
    answer = ExternalAnswer.model_validate_json(out)
    original = ExternalAnswer.model_validate_json((recorded / "answer.json").read_text("utf-8"))
    assert comparable_answer(answer, same_envelope=False) == comparable_answer(
        original, same_envelope=False
    )


@pytest.mark.usefixtures("https_worlds")
def test_ask_with_world_and_config_is_bad_input(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["ask", QUESTION, "--world", str(recorded), "--config", "live.toml"])
    assert code == 2
    assert "--world brings its own settings" in capsys.readouterr().err


@pytest.mark.usefixtures("https_worlds")
def test_record_refuses_to_overwrite_a_folder(
    live: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("keep me", encoding="utf-8")
    config = str(live_config(live, tmp_path))
    code = main(["record", QUESTION, "--config", config, "--out", str(out)])
    assert code == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert (out / "notes.txt").read_text("utf-8") == "keep me"
    assert live.requests == []  # refused before asking anyone


def test_fact_api_recording_replays_with_identical_evidence(live: World, tmp_path: Path) -> None:
    settings = Settings.load(live_config(live, tmp_path))
    semantics = {
        "query_kind": "weather",
        "location": "湛江",
        "time_range": {"start": "2026-12-01", "end": "2026-12-01"},
    }
    environ = {"EQS_TEST_TOKEN": ENV_TOKEN}
    result = record_world(
        "湛江明天天气怎么样？", semantics, settings, tmp_path / "weather", now=NOW, environ=environ
    )
    live.close()
    assert result.answer.status == "answered"
    spec = load_world(tmp_path / "weather")
    manifest = spec.manifest
    assert {httpx.URL(entry.url).path for entry in manifest.api} == {
        "/v1/search",
        "/v1/forecast",
    }
    (geocoding,) = [entry for entry in manifest.api if httpx.URL(entry.url).path == "/v1/search"]
    assert geocoding.file is not None
    assert b"REDACTED REDACTED" in spec.files[geocoding.file]  # the echoed option and token
    assert result.scrubbed == (geocoding.file,)
    with open_world(tmp_path / "weather") as world, world.service() as service:
        again = service.answer("湛江明天天气怎么样？", semantics)
    assert comparable_answer(again, same_envelope=False) == comparable_answer(
        result.answer, same_envelope=False
    )
    assert again.evidence[0].raw_digest == result.answer.evidence[0].raw_digest


def test_a_recording_beyond_its_byte_cap_is_refused_and_writes_nothing(
    live: World, tmp_path: Path
) -> None:
    settings = Settings.load(live_config(live, tmp_path))
    out = tmp_path / "capped"
    with pytest.raises(InputError, match="beyond 2000 bytes"):
        record_world(QUESTION, SEMANTICS, settings, out, now=NOW, environ={}, max_bytes=2000)
    assert not out.exists()


def unreachable_config(folder: Path) -> Path:
    """A live config whose only provider listens nowhere: every request fails."""
    path = folder / "down.toml"
    path.write_text(
        '[network]\nallowed_networks = ["127.0.0.1/32"]\n\n'
        f'[[adapters]]\nkind = "searxng"\nid = "searx"\nbase_url = "http://127.0.0.1:{closed_port()}/"\n',
        encoding="utf-8",
    )
    return path


def test_record_refuses_to_save_a_run_where_no_provider_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "world"
    code = main(["record", QUESTION, "--config", str(unreachable_config(tmp_path)),
                 "--out", str(out), "--now", NOW.isoformat()])  # fmt: skip
    captured = capsys.readouterr()
    assert (code, captured.out) == (3, "")
    assert captured.err == (
        "external-query: record: no provider answered (searx failed (connect_failed)); "
        "no world written (--allow-failed writes it anyway)\n"
    )
    assert not out.exists()


def test_record_with_allow_failed_keeps_the_failure_as_a_world(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "world"
    code = main(["record", QUESTION, "--config", str(unreachable_config(tmp_path)),
                 "--out", str(out), "--now", NOW.isoformat(), "--allow-failed"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "recorded 1 exchanges (0 bytes)" in captured.out
    manifest = load_world(out).manifest
    assert [entry.fault for entry in manifest.search] == ["refused"]


def test_record_world_raises_nothing_answered_and_writes_nothing(tmp_path: Path) -> None:
    settings = Settings.load(unreachable_config(tmp_path))
    out = tmp_path / "world"
    with pytest.raises(NothingAnswered) as caught:
        record_world(QUESTION, SEMANTICS, settings, out, now=NOW, environ={})
    assert [item.status for item in caught.value.answer.attempts] == ["failed"]
    assert not out.exists()


def test_a_third_party_adapter_records_and_replays_through_its_endpoints(
    live: World, tmp_path: Path
) -> None:
    quotes = {"kind": RecordedQuotes.kind, "id": "quotes", "base_url": QUOTES}
    settings = live.settings({**quotes, "api_key": OPTION_SECRET})
    result = record_world(QUOTE_QUESTION, QUOTE_SEMANTICS, settings, tmp_path / "q", now=NOW)
    live.close()
    assert result.answer.status == "answered"
    manifest = load_world(tmp_path / "q").manifest
    assert manifest.adapters == (quotes,)  # its endpoint is kept, its credentials are not
    assert [httpx.URL(entry.url).params["symbol"] for entry in manifest.api] == ["600519"]
    with open_world(tmp_path / "q") as world, world.service() as service:
        again = service.answer(QUOTE_QUESTION, QUOTE_SEMANTICS)
    # The world served the adapter's own origin, named only by its endpoints().
    assert len(world.requests_to("/api/quote", host="quotes.example.net")) == 1
    assert "1688.5" in again.text
    assert comparable_answer(again, same_envelope=False) == comparable_answer(
        result.answer, same_envelope=False
    )


def recorded_fault(error: FetchError) -> str | None:
    recording = Recording()
    recording.failure("page", error.url, error)
    return recording.exchanges[0].fault


def responded(error: FetchError) -> FetchError:
    error.responded = True
    return error


def test_a_failed_page_is_recorded_as_the_fault_that_fails_the_same_way_on_replay() -> None:
    url = "https://news.example.cn/a"
    assert recorded_fault(FetchDeadlineExceeded(url)) == "hang"
    assert recorded_fault(responded(FetchDeadlineExceeded(url))) == "slow_body"
    assert recorded_fault(responded(FetchError(url, reason="protocol_error"))) == "slow_body"
    assert recorded_fault(FetchError(url, reason="protocol_error")) == "reset"
    assert recorded_fault(TooManyRedirects(url)) == "redirect_loop"
    assert recorded_fault(responded(ContentTooLarge(url))) == "oversized"


PORT_A = "http://port-a.example.cn/news"
PORT_SLOW = "http://port-slow.example.cn/news"
PORT_C = "http://port-c.example.cn/news"


#: The two port pages the walk tests read, and the search hit of each.
PORT_PAGES = (
    (PORT_A, "湛江港吞吐量再创新高", hit(PORT_A, "湛江港吞吐量", "湛江港货物吞吐量", "2026-11-20")),
    (PORT_C, "湛江港集装箱航线加密", hit(PORT_C, "湛江港航线", "湛江港集装箱航线", "2026-11-20")),
)


def record_port_walk(out: Path, *, hanging: bool) -> RecordResult:
    """Record the port question into ``out`` from a live world of the two port pages, with
    (``hanging``) a page between them that is still loading when the walk's grace runs out."""
    with World() as live:
        for url, title, _ in PORT_PAGES:
            body = article(
                title,
                [f"{title}：湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八。"],
                published="2026-11-20",
            )
            live.route(url, Reply(body=body))
        hits = [found for _, _, found in PORT_PAGES]
        if hanging:
            live.fault(PORT_SLOW, "hang")
            hits.insert(1, hit(PORT_SLOW, "湛江港吞吐量快讯", "湛江港货物吞吐量快讯", "2026-11-20"))
        live.route(
            f"{SEARX}/search?" + str(httpx.QueryParams({"q": QUESTION})),
            json_reply(searx_body(QUESTION, hits)),
        )
        # Time enough for a cold analysis pool on a busy host: the grace, not a timeout,
        # cuts off the page that hangs.
        network = {"timeout_s": 30.0, "deadline_s": 60.0}
        searx = {"kind": "searxng", "id": "searx", "base_url": SEARX}
        settings = live.settings(searx, network=network)
        return record_world(QUESTION, SEMANTICS, settings, out, now=NOW, environ={})


def page_failures(answer: ExternalAnswer) -> list[str]:
    return [
        item
        for event in answer.audit.named("attempt")
        for item in event.detail.get("page_failures", [])
    ]


def slow_replay(directory: Path, url: str, latency_ms: int) -> None:
    """Make the world at ``directory`` answer ``url`` ``latency_ms`` late, as a loaded host
    would: a replay must not depend on how fast the pages come."""
    manifest = directory / "world.toml"
    data = tomllib.loads(manifest.read_text("utf-8"))
    (entry,) = [page for page in data["pages"] if page["url"] == url]
    entry["latency_ms"] = latency_ms
    manifest.write_text(dump_toml(data), encoding="utf-8")


def test_a_replay_reads_and_cuts_off_the_pages_the_recording_did_whatever_the_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "world"
    recorded = record_port_walk(out, hanging=True)
    assert recorded.answer.status == "answered"
    assert page_failures(recorded.answer) == [f"{PORT_SLOW} cut_off"]
    (walk,) = load_world(out).manifest.walks
    assert (walk.adapter, walk.hits, walk.fates) == (
        "searx",
        (PORT_A, PORT_SLOW, PORT_C),
        ("read", "cut_off", "read"),
    )

    # The replay's host is slow: the second page read comes long after the walk's grace
    # (and twice the first page's time) would have cut it off.
    slow_replay(out, PORT_C, 1500)
    with open_world(out) as world, world.service() as service:
        again = service.answer(QUESTION, SEMANTICS)
    assert page_failures(again) == [f"{PORT_SLOW} cut_off"]
    assert {source.url for source in again.sources} == {PORT_A, PORT_C}
    assert comparable_answer(again, same_envelope=False) == comparable_answer(
        recorded.answer, same_envelope=False
    )
    # The page the recording cut off while loading is cut off unfetched.
    assert world.requests_to("/news", host="port-slow.example.cn") == []
    # The command line's replay walks by the record too.
    capsys.readouterr()
    assert main(["ask", QUESTION, "--world", str(out), "--format", "json"]) == 0
    replayed = ExternalAnswer.model_validate_json(capsys.readouterr().out)
    assert comparable_answer(replayed, same_envelope=False) == comparable_answer(
        recorded.answer, same_envelope=False
    )


def test_a_page_the_recording_cut_off_in_analysis_is_fetched_but_never_analysed_on_replay(
    tmp_path: Path,
) -> None:
    """A page still being analysed when the recording's answer could be formed (a straggler on
    a busy host) ends ``cut_off:analysis`` there; the replay fetches it, as the recording did,
    and cuts it off the same way however fast its analysis would be now."""
    out = tmp_path / "world"
    recorded = record_port_walk(out, hanging=False)
    assert page_failures(recorded.answer) == []
    # As a recording on a busy host would have it: the second page's analysis outlasted the
    # walk, so the recording cut it off after its body arrived.
    manifest = out / "world.toml"
    data = tomllib.loads(manifest.read_text("utf-8"))
    (walk,) = data["walks"]
    assert walk["hits"] == [PORT_A, PORT_C]
    walk["fates"] = ["read", "cut_off:analysis"]
    manifest.write_text(dump_toml(data), encoding="utf-8")

    with open_world(out) as world, world.service() as service:
        again = service.answer(QUESTION, SEMANTICS)
    assert page_failures(again) == [f"{PORT_C} cut_off:analysis"]
    assert {source.url for source in again.sources} == {PORT_A}
    assert len(world.requests_to("/news", host="port-c.example.cn")) == 1  # fetched, as recorded
