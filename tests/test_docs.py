"""The docs describe what the code does today: examples parse, flags and settings are named,
every block of the README runs (offline), and the admission docs' receipt is the code's."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from pydantic import BaseModel

import external_query_service
from external_query_service import ExternalAnswer, Settings
from external_query_service.adapters import builtin_adapters
from external_query_service.admission import parse_receipt, receipt_digest
from external_query_service.cli import build_parser, main
from external_query_service.gateway._registry import adapter_options
from external_query_service.settings import (
    AnalysisSettings,
    AnswerabilitySettings,
    BundleSettings,
    CacheSettings,
    GatewaySettings,
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


#: Each README block, by what it shows: the test that runs it asks for it by this name.
README_BLOCKS: dict[str, Callable[[str, str], bool]] = {
    "pipeline": lambda info, body: info == "text" and "→ Planner" in body,
    "venv": lambda info, body: info == "bash" and "-m venv" in body,
    "install and test": lambda info, body: info == "bash" and "pip install" in body,
    "first example": lambda info, body: info == "bash" and "--docs" in body,
    "first example output": lambda info, body: (
        info == "text" and body.startswith("External live query:")
    ),
    "recorded world": lambda info, body: info == "bash" and "--world" in body,
    "library": lambda info, body: info == "python" and "OpenAI" not in body,
    "chat": lambda info, body: info == "python" and "OpenAI" in body,
}


def readme_blocks() -> list[tuple[str, str]]:
    """Every fenced block of the README as (info string, body)."""
    return re.findall(r"^```(\S*)\n(.*?)^```$", README, flags=re.DOTALL | re.MULTILINE)


def readme_block(name: str) -> str:
    """The body of the one README block ``README_BLOCKS[name]`` picks."""
    (body,) = [body for info, body in readme_blocks() if README_BLOCKS[name](info, body)]
    return body


def shows(shown: str, printed: str) -> bool:
    """Whether ``printed`` is what the README's ``shown`` output stands for: the same lines,
    where ``…`` inside a line is any text and a line of ``…`` alone is any lines."""
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line == "…" else "[^\n]*".join(map(re.escape, line.split("…"))) + "\n"
        for line in shown.splitlines()
    )
    return re.fullmatch(pattern, printed) is not None


def test_shows_reads_an_ellipsis_as_any_text_and_a_line_of_one_as_any_lines() -> None:
    assert shows("a…c\n…\nz\n", "abc\nx\ny\nz\n")
    assert shows("a\n…\nz\n", "a\nz\n")
    assert not shows("a…c\nz\n", "abc\nx\nz\n")  # a line is not any lines
    assert not shows("a\n", "b\n")


def test_every_readme_block_is_run_by_a_test() -> None:
    blocks = readme_blocks()
    assert len(blocks) == README.count("\n```") // 2  # every fence was read as a block
    picked = [[name for name, picks in README_BLOCKS.items() if picks(*block)] for block in blocks]
    assert [block for block, names in zip(blocks, picked, strict=True) if len(names) != 1] == []
    assert sorted(name for names in picked for name in names) == sorted(README_BLOCKS)


@pytest.fixture(scope="module")
def library_example() -> tuple[dict[str, Any], str]:
    """The README's library example run as written (on its recorded world, offline): its
    names and what it printed."""
    code = readme_block("library")
    names: dict[str, Any] = {}
    printed = io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md (library example)", "exec"), names)
    return names, printed.getvalue()


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
        AnswerabilitySettings,
        GatewaySettings,
        BundleSettings,
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


def test_the_readme_pipeline_names_the_stage_models_in_the_order_an_answer_records(
    library_example: tuple[dict[str, Any], str],
) -> None:
    diagram = readme_block("pipeline")
    stages = re.findall(r"^  → (\w+) +(.+?) {2,}\(", diagram, flags=re.MULTILINE)
    models = [what for _, what in stages if what.isidentifier()]
    models += re.findall(r"^  = (\w+) ", diagram, flags=re.MULTILINE)
    assert len(models) == 5  # a model per stage but the gateway's, and the audit
    for name in models:
        assert name in external_query_service.__all__
        model = getattr(external_query_service, name)
        assert issubclass(model, BaseModel)
        assert model.model_config.get("frozen") is True
    (fields,) = re.findall(r"(\w+) fields, no extras", diagram)
    packet = external_query_service.ExternalContextPacket
    assert len(packet.model_fields) == ["four", "five", "six", "seven"].index(fields) + 4
    assert packet.model_config.get("extra") == "forbid"
    answer = library_example[0]["answer"]
    assert isinstance(answer, ExternalAnswer)
    recorded = list(dict.fromkeys(event.stage for event in answer.audit.events))
    named = [stage.lower() for stage, _ in stages if stage.lower() in recorded]
    assert named == [stage for stage in recorded if stage in named]
    assert len(named) == 4  # the packet is the only stage the audit does not name


def test_the_readme_venv_step_makes_and_activates_a_virtual_environment(tmp_path: Path) -> None:
    step = readme_block("venv").strip()
    # As written, less ensurepip's copy of pip (seconds of CPU): the next step's test
    # checks what pip installs.
    step = step.replace("-m venv", "-m venv --without-pip")
    shell = f'{step}\npython -c "import sys; print(sys.prefix)"\n'
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    done = subprocess.run(
        ["bash", "-c", shell], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert Path(done.stdout.strip()) == tmp_path / ".venv"


def test_the_readme_install_step_needs_the_internet_its_result_is_this_environment() -> None:
    """``pip install`` downloads the dependencies, so the README says it needs the internet
    and this test does not run it. Offline, it checks what the step leaves behind: this
    checkout installed, with every requirement of the extra the step names."""
    install, _ = readme_block("install and test").strip().splitlines()
    assert "needs the internet" in README.split("```bash\n" + install, 1)[0].rsplit("```", 1)[1]
    words = shlex.split(install)
    assert words[:3] == ["pip", "install", "-e"]
    extras = re.fullmatch(r"\.\[(\w+)\]", words[3])
    assert extras is not None
    (extra,) = extras.groups()
    installed = distribution("external_query_service")
    assert Path(external_query_service.__file__).parent == ROOT / "external_query_service"
    wanted = [Requirement(line) for line in installed.requires or ()]
    needed = [r for r in wanted if r.marker is not None and r.marker.evaluate({"extra": extra})]
    assert needed  # the extra exists and asks for something
    assert [str(r) for r in needed if _installed(r.name) not in r.specifier] == []


def _installed(name: str) -> Version:
    """The installed version of ``name`` (0: not installed)."""
    try:
        return Version(distribution(name).version)
    except PackageNotFoundError:
        return Version("0")


def test_the_readme_test_step_is_how_this_suite_runs(pytestconfig: pytest.Config) -> None:
    """The README's ``pytest -n 3`` is this very run's command, so it is checked from inside
    rather than started again (a nested ``pytest -n 3`` is four interpreters' start-up,
    some 20 s of CPU on a busy 2-core machine, to show what this run shows): from the
    checkout, ``pytest`` finds this suite, and ``-n`` is an option it knows."""
    _, test = readme_block("install and test").strip().splitlines()
    assert shlex.split(test) == ["pytest", "-n", "3"]
    assert pytestconfig.rootpath == ROOT
    assert pytestconfig.inipath == ROOT / "pyproject.toml"
    assert pytestconfig.getini("testpaths") == [Path(__file__).parent.name]
    assert pytestconfig.pluginmanager.hasplugin("xdist")
    pytestconfig.getoption("numprocesses")  # -n's own option; unknown without xdist


def test_the_readme_first_example_prints_what_the_readme_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    words = shlex.split(readme_block("first example"))
    assert words[0] == "external-query"
    assert main(words[1:]) == 0
    printed = capsys.readouterr().out
    assert shows(readme_block("first example output"), printed), printed


def test_readme_is_a_ten_minute_read_that_states_the_test_duration() -> None:
    assert len(README.encode("utf-8")) < 12_000
    # A figure in minutes for the machine it was measured on, not "a few minutes".
    assert re.search(r"the tests take about [\d½]+ minutes on a quiet 2-core machine", README)


def test_the_readme_cli_example_answers_offline_from_a_recorded_world(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    words = shlex.split(readme_block("recorded world").replace("\\\n", " "))
    assert words[0] == "external-query"
    assert main(words[1:]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].startswith("> status: answered")


def test_the_readme_library_example_answers_offline(
    library_example: tuple[dict[str, Any], str],
) -> None:
    status, text = library_example[1].split("\n", 1)
    assert status == "answered None"
    assert text.startswith("外部实时查询：")


def test_the_readme_chat_example_answers_from_the_served_docs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("fastapi")
    from external_query_service import ExternalQueryService
    from external_query_service.server import ServerThread

    code = readme_block("chat")
    intro = README.split("## A chat front-end", 1)[1].split("```python", 1)[0]
    words = shlex.split(re.findall(r"`(external-query serve [^`]+)`", intro)[0])
    assert words[1:4] == ["serve", "--docs", "docs/architecture"]
    capsys.readouterr()
    settings = Settings.from_mapping({"analysis": {"processes": 0}})
    service = ExternalQueryService(settings.with_docs(ROOT / words[3]))
    with ServerThread(service) as server:
        exec(code.replace("http://127.0.0.1:8080", server.url), {})
    printed = capsys.readouterr().out
    assert printed.startswith("External live query:")
    assert "\nSources:\n1. Site: docs;" in printed


ADMISSION_DOC = (ROOT / "docs" / "architecture" / "admission.md").read_text(encoding="utf-8")


def test_the_admission_docs_example_receipt_is_the_one_the_library_example_binds(
    library_example: tuple[dict[str, Any], str],
) -> None:
    section = ADMISSION_DOC.split("\n## An example receipt\n", 1)[1].split("\n## ", 1)[0]
    (shown,) = fenced("json", section)
    data = json.loads(shown)
    receipt = parse_receipt(data)  # the receipt model takes it as it is
    listed = ADMISSION_DOC.split("Each source carries ", 1)[1].split(".", 1)[0]
    documented = set(re.findall(r"`(\w+)`", listed))
    assert documented >= {"source_ref", "finding", "accessed_at", "content_digest"}
    assert [documented - set(source) for source in data["sources"]] == [set()]
    admission = library_example[0]["answer"].admission
    assert receipt.request_id == admission.request_id
    assert receipt.plan_id == admission.plan_ids[0]
    assert receipt_digest(receipt) == admission.receipt_digests[0]  # every field, exactly


def test_architecture_docs_exist() -> None:
    for name in ("overview.md", "RUNTIME_GUARDRAILS.md", "CODE_REFERENCE_INDEX.md"):
        assert (ROOT / "docs" / "architecture" / name).is_file(), name


#: A document named in a text: a relative path ending in ``.md`` (linked or in backticks).
_NAMED_DOC = re.compile(r"[\w./-]+\.md\b")


def _named_docs(path: Path) -> set[Path]:
    """The Markdown files ``path`` names, read from the root or from its own folder."""
    found = set()
    for name in _NAMED_DOC.findall(path.read_text("utf-8")):
        for base in (ROOT, path.parent):
            candidate = (base / name).resolve()
            if candidate.is_file():
                found.add(candidate)
    return found


def test_every_document_in_docs_is_reached_from_the_readme() -> None:
    # Through the README's own list, or a document it names (which names the next, ...).
    reached = {(ROOT / "README.md").resolve()}
    pending = list(reached)
    while pending:
        for doc in _named_docs(pending.pop()) - reached:
            reached.add(doc)
            pending.append(doc)
    docs = sorted((ROOT / "docs").rglob("*.md"))
    assert docs
    assert [doc.relative_to(ROOT).as_posix() for doc in docs if doc.resolve() not in reached] == []


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


def test_the_overview_says_why_each_hand_written_part_is_not_a_library() -> None:
    overview = (ROOT / "docs" / "architecture" / "overview.md").read_text(encoding="utf-8")
    section = overview.split("\n## Hand-written where a library exists\n", 1)[1].split("\n## ")[0]
    for library in (
        "`limits`",
        "`sse-starlette`",
        "`asgi-correlation-id`",
        "`TrustedHostMiddleware`",
        "`openai`",
    ):
        (line,) = [item for item in section.split("\n- ")[1:] if library in item]
        assert re.search(r"\d", line), library  # a measured reason, with its figure
    assert "bench/library_choices.py" in section
    assert (ROOT / "bench" / "library_choices.py").is_file()
