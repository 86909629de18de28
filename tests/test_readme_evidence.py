"""The CLI reference's evidence flow (``docs/cli.md``, moved there from the README) runs as
written: every command, in order, against its own ``external-query.toml`` pointed at a
loopback world, each step's saved output feeding the next. And every example in the README
or a ``docs/*.md`` reference that saves output to a file asks for JSON."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from external_query_service.cli import main
from external_query_service.testing import LoopbackServer, World, json_reply
from tests.support.paths import REPO
from tests.support.world import provider_receipt

ROOT = REPO
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The CLI reference, where the online example and the evidence flow moved from the README.
CLI_DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
#: The README and the references moved out of it.
DOCS = [README] + [path.read_text("utf-8") for path in sorted((ROOT / "docs").glob("*.md"))]


def section(title: str) -> str:
    body = CLI_DOC.split(f"\n## {title}\n", 1)[1]
    return body.split("\n## ", 1)[0]


def commands(block: str) -> list[str]:
    """The block's lines with ``\\`` continuations joined; comments kept as they are."""
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)


def readme_settings(world: World) -> str:
    """The CLI reference's ``external-query.toml``, each adapter pointed at the loopback world."""
    sample = next(block for block in re.findall(r"```toml\n(.*?)```", CLI_DOC, flags=re.DOTALL)
                  if block.startswith("# external-query.toml"))  # fmt: skip
    loopback = {"open_meteo": world.open_meteo(), "frankfurter": world.frankfurter()}
    lines = ['[network]\nallowed_networks = ["127.0.0.1/32"]\n']
    for adapter in tomllib.loads(sample)["adapters"]:
        where = {k: v for k, v in loopback[adapter["kind"]].items() if k.endswith("_url")}
        lines.append("[[adapters]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in {**adapter, **where}.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture
def world(loopback: LoopbackServer) -> World:
    """Fact APIs that answer the readiness probes of the CLI reference's adapters."""
    world = World(loopback)
    world.geocoding(lambda _request: json_reply({"results": []}))
    world.forecast(lambda _request: json_reply({"daily": {"time": []}}))
    world.fx("currencies", json_reply({"CNY": "Chinese Renminbi Yuan", "USD": "US Dollar"}))
    return world


def test_the_readme_evidence_flow_runs_as_written(
    world: World,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the default ledger
    (tmp_path / "external-query.toml").write_text(readme_settings(world), encoding="utf-8")
    (flow,) = bash_blocks(section("Evidence admission"))
    steps = commands(flow)
    admitted = [
        words[i + 1]
        for words in map(shlex.split, steps)
        for i, word in enumerate(words)
        if word == "--admit-source"
    ]
    printed: dict[str, str] = {}
    for step in steps:
        if step.startswith("#"):  # the provider's turn: it answers the plan
            plan = json.loads((tmp_path / "plan.json").read_text("utf-8"))
            receipt = provider_receipt(plan, admitted)
            (tmp_path / "receipt.json").write_text(json.dumps(receipt), encoding="utf-8")
            continue
        words = shlex.split(step)
        assert words[0] == "external-query"
        target = words[words.index(">") + 1] if ">" in words else None
        argv = words[1 : words.index(">")] if target else words[1:]
        code = main(argv)
        captured = capsys.readouterr()
        assert (code, captured.err) == (0, ""), step
        if target:
            json.loads(captured.out)  # a saved output is JSON, the next step's input
            (tmp_path / target).write_text(captured.out, encoding="utf-8")
        printed[" ".join(argv[:2])] = captured.out

    providers = json.loads((tmp_path / "providers.json").read_text("utf-8"))
    ready = {row["provider_id"] for row in providers["providers"] if row["ready"]}
    assert ready == {"connector:weather", "connector:fx"}  # probed just now, on loopback
    plan = json.loads((tmp_path / "plan.json").read_text("utf-8"))
    assert plan["selected_provider"]["provider_id"] == "connector:weather"
    admission = json.loads((tmp_path / "admission.json").read_text("utf-8"))
    assert [item["source_ref"] for item in admission["admitted_sources"]] == admitted
    assert "- coverage: complete (1 present, 0 missing)" in printed["evidence readback"]
    assert "state: **retired**" in printed["evidence retire"]


def test_every_readme_example_that_saves_output_asks_for_json() -> None:
    saving = [
        step
        for text in DOCS
        for block in bash_blocks(text)
        for step in commands(block)
        if step.startswith("external-query") and " > " in step
    ]
    assert saving  # the evidence flow saves its steps
    assert [step for step in saving if "--format json" not in step] == []
