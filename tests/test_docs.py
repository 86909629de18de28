"""The docs describe what the code does today: examples parse, flags and settings are named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from external_query_service import Settings
from external_query_service.adapters import builtin_adapters
from external_query_service.cli import build_parser
from external_query_service.gateway.registry import adapter_options
from external_query_service.settings import (
    AnalysisSettings,
    CacheSettings,
    NetworkSettings,
    ServerSettings,
    SourceSettings,
    VerifierSettings,
)

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def fenced(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def test_readme_settings_sample_is_valid_settings() -> None:
    samples = [block for block in fenced("toml") if "[network]" in block]
    assert samples, "README has no full settings sample"
    settings = Settings.from_toml(samples[0], origin="README")
    assert {adapter.kind for adapter in settings.adapters} >= {
        "searxng",
        "open_meteo",
        "frankfurter",
        "local_docs",
    }
    for adapter in settings.adapters:
        adapter_options(adapter)  # each adapter's own keys pass its Options


@pytest.mark.parametrize("kind", sorted(builtin_adapters()))
def test_every_builtin_adapter_option_is_documented_in_the_readme(kind: str) -> None:
    sample = next(block for block in fenced("toml") if "[network]" in block)
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
def test_every_settings_field_is_documented_in_the_readme(section: type) -> None:
    sample = next(block for block in fenced("toml") if "[network]" in block)
    undocumented = [name for name in section.model_fields if f"{name} =" not in sample]
    assert undocumented == []


def test_every_ask_flag_is_documented_in_the_readme() -> None:
    parser = build_parser()
    ask = parser._subparsers._group_actions[0].choices["ask"]  # type: ignore[union-attr]
    flags = [
        option
        for action in ask._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    missing = [flag for flag in flags if flag not in README]
    assert missing == []


def test_readme_names_one_install_and_one_test_command() -> None:
    shell = "\n".join(fenced("bash"))
    assert "pip install -e '.[dev]'" in shell
    assert re.search(r"^pytest$", shell, flags=re.MULTILINE)


def test_architecture_docs_exist() -> None:
    for name in ("overview.md", "RUNTIME_GUARDRAILS.md", "CODE_REFERENCE_INDEX.md"):
        assert (ROOT / "docs" / "architecture" / name).is_file(), name


def test_code_reference_index_names_every_module() -> None:
    index = (ROOT / "docs" / "architecture" / "CODE_REFERENCE_INDEX.md").read_text("utf-8")
    package = ROOT / "external_query_service"
    skipped = {"__init__.py", "__main__.py", "_version.py"}
    modules = sorted(
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if path.name not in skipped and "__pycache__" not in path.parts
    )
    assert [module for module in modules if module not in index] == []
