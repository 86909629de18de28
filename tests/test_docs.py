"""The docs describe what the code does today: examples parse, flags and settings are named."""

from __future__ import annotations

import ast
import re
import shlex

import pytest

from external_query_service import Settings
from external_query_service.adapters import builtin_adapters
from external_query_service.cli import build_parser, main
from external_query_service.gateway.registry import adapter_options
from external_query_service.settings import (
    AnalysisSettings,
    CacheSettings,
    NetworkSettings,
    ServerSettings,
    SourceSettings,
    VerifierSettings,
)
from tests.support.paths import REPO

ROOT = REPO
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The settings reference, moved out of the README: its full sample names every key.
SETTINGS_DOC = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
#: The CLI reference, moved out of the README: it names every flag.
CLI_DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def fenced(language: str, text: str = README) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def test_settings_doc_sample_is_valid_settings() -> None:
    samples = [block for block in fenced("toml", SETTINGS_DOC) if "[network]" in block]
    assert samples, "docs/settings.md has no full settings sample"
    settings = Settings.from_toml(samples[0], origin="docs/settings.md")
    assert {adapter.kind for adapter in settings.adapters} >= {
        "searxng",
        "open_meteo",
        "frankfurter",
        "local_docs",
    }
    for adapter in settings.adapters:
        adapter_options(adapter)  # each adapter's own keys pass its Options


@pytest.mark.parametrize("kind", sorted(builtin_adapters()))
def test_every_builtin_adapter_option_is_documented_in_the_settings_doc(kind: str) -> None:
    sample = next(block for block in fenced("toml", SETTINGS_DOC) if "[network]" in block)
    options = builtin_adapters()[kind].Options.model_fields
    assert [name for name in options if f"{name} =" not in sample] == []


@pytest.mark.parametrize(
    "section",
    [
        NetworkSettings,
        SourceSettings,
        VerifierSettings,
        ServerSettings,
        CacheSettings,
        AnalysisSettings,
    ],
)
def test_every_settings_field_is_documented_in_the_settings_doc(section: type) -> None:
    sample = next(block for block in fenced("toml", SETTINGS_DOC) if "[network]" in block)
    undocumented = [name for name in section.model_fields if f"{name} =" not in sample]
    assert undocumented == []


def test_every_ask_flag_is_documented_in_the_cli_doc() -> None:
    parser = build_parser()
    ask = parser._subparsers._group_actions[0].choices["ask"]  # type: ignore[union-attr]
    flags = [
        option
        for action in ask._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    missing = [flag for flag in flags if flag not in CLI_DOC]
    assert missing == []


def test_readme_names_one_install_and_one_test_command() -> None:
    shell = "\n".join(fenced("bash"))
    assert "pip install -e '.[dev]'" in shell
    assert re.search(r"^pytest -n 2$", shell, flags=re.MULTILINE)


def test_readme_is_a_ten_minute_read_that_states_the_test_duration() -> None:
    assert len(README.encode("utf-8")) < 12_000
    assert "a few minutes on 2 cores" in README


def test_the_readme_cli_example_answers_offline_from_a_recorded_world(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    (step,) = [
        line
        for block in fenced("bash")
        for line in [block.replace("\\\n", " ")]
        if "--world" in line
    ]
    words = shlex.split(step)
    assert words[0] == "external-query"
    assert main(words[1:]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].startswith("> status: answered")


def test_the_readme_library_example_answers_offline(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    (code,) = fenced("python")
    exec(compile(code, "README.md (library example)", "exec"), {})
    status, text = capsys.readouterr().out.split("\n", 1)
    assert status == "answered None"
    assert text.startswith("外部实时查询：")


def test_architecture_docs_exist() -> None:
    for name in ("overview.md", "RUNTIME_GUARDRAILS.md", "CODE_REFERENCE_INDEX.md"):
        assert (ROOT / "docs" / "architecture" / name).is_file(), name


def test_code_reference_index_names_every_folder_and_top_level_module() -> None:
    index = (ROOT / "docs" / "architecture" / "CODE_REFERENCE_INDEX.md").read_text("utf-8")
    package = ROOT / "external_query_service"
    skipped = {"__init__.py", "__main__.py", "_version.py"}
    named = [
        f"`{path.name}/`" if path.is_dir() else f"`{path.name}`"
        for path in package.iterdir()
        if (path.is_dir() and (path / "__init__.py").is_file())
        or (path.suffix == ".py" and path.name not in skipped)
    ]
    assert [name for name in named if name not in index] == []


def test_every_module_says_what_it_holds() -> None:
    package = ROOT / "external_query_service"
    silent = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if path.stat().st_size and not ast.get_docstring(ast.parse(path.read_text("utf-8")))
    ]
    assert silent == []
