"""The repository explains itself: no file cites a document that is not in it.

A comment or docstring states the rule in its own words instead of pointing at an outside
security review, API notes, a plan or an issue tracker; and nothing reads a path next to
the repository.
"""

from __future__ import annotations

import re

from tests.support.paths import REPO

REPO = REPO
FOLDERS = ("external_query_service", "tests", "docs", "bench", "examples", "prompts")
SUFFIXES = {".py", ".md", ".toml", ".j2"}

_OUTSIDE = re.compile(
    r"SECURITY(?:\.md)?\b|\bAPIS\.md|\bARCHITECTURE\.md|\bblueprint\b|\.\./shared|"
    r"\b[a-z][\w.-]*#\d{2,}\b|\b[Ii]ssue \d+|\bfinding \d+|\bmatrix row \d+"
)

#: Files the lead is reworking that still cite an outside document; each entry leaves once
#: the file is fixed there (tested: an entry must still be needed).
LEAD_OWNED: set[str] = set()


def _citing() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    files = [REPO / "README.md", REPO / "pyproject.toml"]
    files += [
        path
        for folder in FOLDERS
        for path in sorted((REPO / folder).rglob("*"))
        if path.suffix in SUFFIXES and "__pycache__" not in path.parts
    ]
    for path in files:
        name = str(path.relative_to(REPO))
        if name == "tests/test_no_outside_references.py":
            continue
        hits = [match.group(0) for match in _OUTSIDE.finditer(path.read_text(encoding="utf-8"))]
        if hits:
            found[name] = hits
    return found


def test_the_pattern_finds_each_kind_of_outside_citation() -> None:
    for text in [
        "(SECURITY T23)",
        "SECURITY.md finding 9",
        "APIS.md §6",
        "ARCHITECTURE.md",
        'blueprint "Decisions"',
        "../shared/corpus",
        "(httpx#2473)",
        "see issue 11",
    ]:
        assert _OUTSIDE.search(text), text
    assert not _OUTSIDE.search("RFC 8785 canonical JSON; docs/architecture/overview.md")


def test_no_file_cites_a_document_outside_the_repository() -> None:
    citing = {name: hits for name, hits in _citing().items() if name not in LEAD_OWNED}
    assert citing == {}


def test_every_lead_owned_exemption_is_still_needed() -> None:
    assert LEAD_OWNED - set(_citing()) == set()
