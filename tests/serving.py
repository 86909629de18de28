"""What the HTTP service tests share (no server package imported here, so a module that
needs only these runs without the ``[server]`` extra)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DOCS", "DOCS_QUESTION", "write_docs"]

DOCS_QUESTION = "What does the verifier check?"
DOCS = {"query_kind": "documentation"}


def write_docs(folder: Path) -> Path:
    """A docs folder with one page long enough to need several bounded reads."""
    folder.mkdir(parents=True, exist_ok=True)
    paragraphs = "\n\n".join(
        f"Paragraph {n}: the verifier checks origin, target, time range and the number of "
        "independent sources before anything is answered; rejected evidence is never quoted."
        for n in range(30)
    )
    (folder / "verifier.md").write_text(f"# Verifier\n\n{paragraphs}\n", encoding="utf-8")
    return folder
