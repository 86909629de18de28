"""``external-query ask``: outcomes exit 0, bad input exits 2 with one line, JSON is the answer."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import external_query_service.cli
from external_query_service import __version__
from external_query_service._clock import parse_now
from external_query_service.cli import main
from external_query_service.errors import InputError
from external_query_service.testing import LoopbackServer
from tests.support.world import World, article, docs_folder, hit

NOW = "2026-11-30T10:00:00+08:00"


DOCS = {
    "verifier.md": "# Verifier\n\nThe verifier checks the origin of every source, whether it is "
    "about the same target, whether it falls in the time range, and whether there are enough "
    "independent sources.\n",
    "fetching.md": "# Fetching\n\nPages are fetched through a guarded transport with byte caps "
    "and a total deadline; redirects are checked hop by hop.\n",
}


def docs(tmp_path: Path) -> Path:
    return docs_folder(tmp_path, DOCS)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_offline_documentation_question_answers_from_local_docs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        [
            "ask",
            "What does the verifier check?",
            "--kind",
            "documentation",
            "--docs",
            str(docs(tmp_path)),
            "--now",
            NOW,
        ],
        capsys,
    )
    assert code == 0, err
    assert out.startswith("External live query: ")  # an English question reads in English
    assert "independent sources" in out
    assert "status: answered" in out
    assert "planner: upstream_semantics" in out
    assert "presenter: extractive" in out


def test_json_format_is_the_full_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        [
            "ask",
            "How are pages fetched?",
            "--kind",
            "documentation",
            "--docs",
            str(docs(tmp_path)),
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0
    data = json.loads(out)
    assert data["status"] == "answered"
    assert data["route_mode"] == "external"
    assert data["plan"]["query_kind"] == "documentation"
    assert {"text", "sources", "attempts", "evidence", "verifier", "audit"} <= set(data)
    assert data["sources"][0]["url"].startswith("docs://docs/")


def test_no_data_source_is_an_input_error_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["ask", "今天有什么新闻？", "--now", NOW], capsys)
    assert (code, out) == (2, "")
    assert "--config" in err
    assert "--docs" in err
    empty = tmp_path / "empty.toml"
    empty.write_text("[network]\ntimeout_s = 5.0\n", encoding="utf-8")
    code, _, err = run(["ask", "今天有什么新闻？", "--config", str(empty)], capsys)
    assert code == 2
    assert "no data source is configured" in err


def test_docs_alone_asks_a_documentation_question(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        ["ask", "What does the verifier check?", "--docs", str(docs(tmp_path)), "--format", "json"],
        capsys,
    )
    assert code == 0, err
    data = json.loads(out)
    assert (data["status"], data["plan"]["query_kind"]) == ("answered", "documentation")


def test_an_explicit_kind_wins_over_the_docs_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        ["ask", "今天有什么新闻？", "--docs", str(docs(tmp_path)), "--kind", "news"], capsys
    )
    assert code == 0
    # local_docs serves documentation only: a news question finds no source.
    assert "status: insufficient_evidence" in out


@pytest.mark.parametrize("kind", ["nonsense", "Documentation"])
def test_an_unknown_kind_exits_2_listing_the_known_kinds(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["ask", "问题", "--docs", str(docs(tmp_path)), "--kind", kind], capsys)
    assert (code, out) == (2, "")
    assert f"unknown query kind {kind!r}" in err
    assert "weather, exchange_rate, stock_quote, news, generic_web, documentation" in err
    assert len(err.strip().splitlines()) == 1


def test_a_question_over_the_limit_exits_2_naming_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["ask", "a" * 20_001, "--docs", str(docs(tmp_path))], capsys)
    assert (code, out) == (2, "")
    assert "question" in err
    assert "20,000" in err
    assert "ContractRejected" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_question_at_the_limit_is_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["ask", "verifier " * 2222 + "ab", "--docs", str(docs(tmp_path))], capsys)
    assert code == 0
    assert "status: " in out


def test_the_question_comes_from_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    question = tmp_path / "question.txt"
    question.write_text("\ufeffWhat does the verifier check?\n", encoding="utf-8")
    code, out, err = run(
        ["ask", "--question-file", str(question), "--docs", str(docs(tmp_path))], capsys
    )
    assert code == 0, err
    assert "independent sources" in out


@pytest.mark.parametrize("argv", [["-"], ["--question-file", "-"]])
def test_the_question_comes_from_stdin(
    argv: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"How are pages fetched?\n")))
    code, out, err = run(["ask", *argv, "--docs", str(docs(tmp_path)), "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["plan"]["question"] == "How are pages fetched?"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "no question"),
        (["q", "--question-file", "q.txt"], "not both"),
        (["--question-file", "missing.txt"], "--question-file: missing.txt: file not found"),
        (["--question-file", "."], "not a regular file"),
        (["--question-file", "latin1.txt"], "not UTF-8 text"),
    ],
)
def test_question_sources_that_cannot_be_used_exit_2(
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "latin1.txt").write_bytes("Qu\xe9 pasa?".encode("latin-1"))
    code, out, err = run(["ask", *argv, "--docs", str(docs(tmp_path))], capsys)
    assert (code, out) == (2, "")
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_a_reversed_time_range_reads_without_a_pydantic_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ask", "问题", "--docs", str(docs(tmp_path)), "--since", "2026-12-05"]
    code, _, err = run([*argv, "--until", "2026-12-01"], capsys)
    assert code == 2
    assert "time_range end 2026-12-01 is before start 2026-12-05" in err
    assert "Value error" not in err


def test_flags_build_semantics_for_a_live_search(
    loopback: LoopbackServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(loopback)
    question = "湛江港今年吞吐量是多少？"
    url = world.page(
        "port-c.test",
        "/news",
        article(
            "湛江港吞吐量",
            ["湛江港今年前十个月货物吞吐量达到2.6亿吨，同比增长百分之八。"],
            published="2026-11-20",
        ),
    )
    world.results(question, [hit(url, "湛江港", "吞吐量")])
    config = tmp_path / "live.toml"
    config.write_text(
        f"""
[network]
allowed_networks = ["127.0.0.1/32"]
resolve = {{ "port-c.test" = "127.0.0.1" }}

[[adapters]]
kind = "searxng"
id = "searx"
base_url = "{world.base("/searx")}"
""",
        encoding="utf-8",
    )
    code, out, err = run(
        [
            "ask",
            question,
            "--config",
            str(config),
            "--entity",
            "湛江港",
            "--since",
            "2026-11-01",
            "--until",
            "2026-11-30",
            "--now",
            NOW,
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["plan"]["entities"] == ["湛江港"]
    assert data["plan"]["time_range"] == {"start": "2026-11-01", "end": "2026-11-30"}
    assert data["status"] == "answered"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "missing.toml"], "settings file not found"),
        (["--semantics-json", "missing.json"], "file not found"),
        (["--since", "2026-13-01"], "--since: not a date"),
        (["--now", "2026-11-30T10:00:00"], "--now needs an offset"),
        (["--contract", "poem"], "invalid choice"),
        (["--docs", "no-such-folder"], "--docs: not a folder"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    args: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["ask", "问题", *args], capsys)
    assert code == 2
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[[adapters]]\nkind = 'carrier_pigeon'\n", "unknown adapter kind 'carrier_pigeon'"),
        ("[network]\nspeed = 3\n", "network.speed: unknown key"),
        ("[network\n", "invalid TOML"),
        ("[network]\nallowed_networks = ['not-a-net']\n", "allowed_networks"),
        ("[[adapters]]\nkind = 'local_docs'\nroot = 'handbook'\n", "root is not a folder"),
        (
            "[[adapters]]\nkind = 'open_meteo'\ngeocodeing_url = 'https://g.test'\n",
            "adapter 'open_meteo' (open_meteo): unknown key 'geocodeing_url'",
        ),
    ],
)
def test_bad_settings_exit_2_with_one_line(
    content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(content, encoding="utf-8")
    code, _, err = run(["ask", "问题", "--config", str(config)], capsys)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "invalid JSON"),
        ('{"location": "a", "location": "b"}', "duplicate key"),
        ('{"query_kind": NaN}', "NaN is not valid JSON"),
        ("[1, 2]", "root must be a JSON object"),
        ('{"time_range": {"start": "2026-12-02", "end": "2026-12-01"}}', "before start"),
        ('{"mood": "happy"}', "mood: unknown key"),
    ],
)
def test_bad_semantics_json_exits_2(
    content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    semantics = tmp_path / "semantics.json"
    semantics.write_text(content, encoding="utf-8")
    code, _, err = run(["ask", "问题", "--semantics-json", str(semantics)], capsys)
    assert code == 2
    assert message in err


def test_console_script_reports_errors_without_a_traceback(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "external_query_service.cli", "ask", "q", "--config", "nope.toml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    assert completed.stderr.startswith("external-query: error:")


def test_the_package_runs_as_the_program_with_python_dash_m() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "external_query_service", "--version"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0
    assert completed.stdout.strip() == f"external-query {__version__}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tomorrow", "--now: not an ISO datetime: 'tomorrow'"),
        ("2026-11-30T10:00:00", "--now needs an offset (e.g. 2026-11-30T10:00:00+08:00)"),
    ],
)
def test_a_clock_flag_that_is_not_an_aware_iso_datetime_is_one_input_error(
    text: str, message: str
) -> None:
    with pytest.raises(InputError) as caught:
        parse_now(text)
    assert str(caught.value) == message
    assert parse_now("2026-11-30T10:00:00+08:00").utcoffset() is not None


def test_every_command_reads_its_clock_flag_through_one_parser() -> None:
    folder = Path(external_query_service.cli.__file__).parent
    parsing = [
        path.name for path in folder.glob("*.py") if "datetime.fromisoformat" in path.read_text()
    ]
    users = sorted(path.name for path in folder.glob("*.py") if "parse_now(" in path.read_text())
    assert (parsing, users) == ([], ["ask.py", "record.py", "toolkit.py"])
