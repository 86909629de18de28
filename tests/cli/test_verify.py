"""``external-query verify`` and ``ask --format bundle``: the verdict is the exit code."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from external_query_service.cli import main
from external_query_service.cli.verify import EXIT_CODES
from external_query_service.testing import World
from tests.support.bundles import Answered, answer_airshow
from tests.support.world import docs_folder

NOW = "2026-11-30T10:00:00+08:00"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _files(answered: Answered, world: World, tmp_path: Path) -> tuple[Path, Path]:
    """The bundle as a file, and a settings file that reaches the world's pages on loopback
    (the guard on, only 127.0.0.1 admitted)."""
    bundle = tmp_path / "answer.bundle.json"
    bundle.write_text(answered.bundle, encoding="utf-8")
    config = tmp_path / "verify.toml"
    config.write_text(
        '[network]\nallowed_networks = ["127.0.0.1/32"]\n'
        'resolve = { "news-a.test" = "127.0.0.1" }\ntimeout_s = 5.0\n',
        encoding="utf-8",
    )
    return bundle, config


def test_exit_codes_are_distinct_per_verdict_and_zero_only_for_holds() -> None:
    assert EXIT_CODES["holds"] == 0
    assert len(set(EXIT_CODES.values())) == len(EXIT_CODES)
    assert 2 not in EXIT_CODES.values()


def test_a_bundle_that_holds_exits_0_with_one_line_per_source_and_a_summary(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, config = _files(answer_airshow(world), world, tmp_path)

    code, out, err = run(["verify", str(bundle), "--refetch", "--config", str(config)], capsys)

    assert code == 0, err
    lines = out.splitlines()
    assert sum(line.startswith("- **holds** <http://news-a.test:") for line in lines) == 1
    assert lines[-1].startswith("**holds** (refetched; signature absent; ledger: not configured)")


def test_json_format_is_one_object_with_the_verdict_and_each_sources(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, _ = _files(answer_airshow(world), world, tmp_path)

    code, out, _ = run(["verify", str(bundle), "--format", "json"], capsys)

    shown = json.loads(out)
    assert code == 0
    assert shown["verdict"] == "holds"
    assert [source["verdict"] for source in shown["sources"]] == ["holds"]


def test_an_edited_bundle_exits_with_the_tampered_code(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, _ = _files(answer_airshow(world), world, tmp_path)
    bundle.write_text(
        bundle.read_text(encoding="utf-8").replace("大型无人运输机", "大型有人运输机"),
        encoding="utf-8",
    )

    code, out, _ = run(["verify", str(bundle)], capsys)

    assert code == EXIT_CODES["tampered"] == 3
    assert "- **tampered**" in out


def test_a_changed_page_exits_with_the_changed_code_naming_the_closest_passage(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, config = _files(answer_airshow(world), world, tmp_path)
    world.page("news-a.test", "/airshow", "<html><body><p>本届航展的展期共六天。</p></body></html>")

    code, out, _ = run(["verify", str(bundle), "--refetch", "--config", str(config)], capsys)

    assert code == EXIT_CODES["changed"] == 4
    assert "closest passage: 「" in out


def test_a_page_that_is_gone_or_unreachable_exits_with_its_own_code(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, config = _files(answer_airshow(world), world, tmp_path)
    argv = ["verify", str(bundle), "--refetch", "--config", str(config)]

    world.page("news-a.test", "/airshow", "gone", status=410)
    assert run(argv, capsys)[0] == EXIT_CODES["gone"] == 5
    world.page("news-a.test", "/airshow", "later", status=503)
    assert run(argv, capsys)[0] == EXIT_CODES["unreachable"] == 6


def test_input_that_is_not_a_bundle_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"status": "answered"}', encoding="utf-8")

    for argv in (["verify", str(tmp_path / "missing.json")], ["verify", str(other)]):
        code, out, err = run(argv, capsys)
        assert code == 2
        assert out == ""
        assert len(err.strip().splitlines()) == 1


def test_ask_format_bundle_prints_a_bundle_that_verify_reads_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = docs_folder(
        tmp_path, {"verifier.md": "# Verifier\n\nThe verifier checks the origin of every source.\n"}
    )
    argv = ["ask", "What does the verifier check?", "--docs", str(folder), "--now", NOW]
    code, out, err = run([*argv, "--format", "bundle"], capsys)
    assert code == 0, err
    bundle = tmp_path / "docs.bundle.json"
    bundle.write_text(out, encoding="utf-8")
    assert json.loads(out)["schema_version"] == "external_query_bundle_v1"

    code, shown, _ = run(["verify", str(bundle), "--refetch", "--format", "json"], capsys)

    result = json.loads(shown)
    assert code == 0
    assert result["verdict"] == "holds"
    assert result["sources"]
    assert all("not fetched again" in source["detail"] for source in result["sources"])


def test_a_bundle_on_stdin_is_read_with_a_dash(
    world: World,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answered = answer_airshow(world)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(answered.bundle.encode())))

    code, out, _ = run(["verify", "-", "--format", "json"], capsys)

    assert code == 0
    assert json.loads(out)["bundle_id"] == json.loads(answered.bundle)["bundle_id"]


def test_a_signing_variable_named_but_unset_exits_2_with_one_line(
    world: World,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bundle, _ = _files(answer_airshow(world), world, tmp_path)
    monkeypatch.delenv("EQ_TEST_UNSET_BUNDLE_KEY", raising=False)
    config = tmp_path / "signed.toml"
    config.write_text('[bundle]\nsigning_key_env = "EQ_TEST_UNSET_BUNDLE_KEY"\n', encoding="utf-8")

    code, out, err = run(["verify", str(bundle), "--config", str(config)], capsys)

    assert (code, out) == (2, "")
    assert "EQ_TEST_UNSET_BUNDLE_KEY" in err
    assert len(err.strip().splitlines()) == 1
