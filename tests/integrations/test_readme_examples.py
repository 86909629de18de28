"""The LangChain and LlamaIndex examples of ``docs/langchain_llamaindex.md`` run as written
(offline, on the repository's own architecture notes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _example(module: str) -> str:
    reference = (ROOT / "docs" / "langchain_llamaindex.md").read_text(encoding="utf-8")
    section = reference.split("## LangChain and LlamaIndex", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    (block,) = [b for b in blocks if module in b]
    return str(block)


@pytest.mark.parametrize(
    ("module", "framework"), [("langchain", "langchain_core"), ("llamaindex", "llama_index.core")]
)
def test_the_doc_example_prints_admitted_sources(
    module: str, framework: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip(framework)
    monkeypatch.chdir(ROOT)
    code = _example(module)
    assert len(code.strip().splitlines()) <= 11

    exec(compile(code, f"docs/langchain_llamaindex.md ({module})", "exec"), {})

    printed = capsys.readouterr().out
    assert printed.count("docs://docs/") >= 3  # three documents, and the tool's sources
    assert "status: answered" in printed
