"""One of each helper: one digest spelling, one spelling of "normalize", one class per name.

The strict JSON reader and the clock-flag parser have their own guards beside their tests
(``test_jsonio.py``, ``test_cli.py``).
"""

from __future__ import annotations

import inspect
import re
from collections import defaultdict
from pathlib import Path

import external_query_service
from tests.support.package_modules import package_modules

PACKAGE = Path(external_query_service.__file__).parent
REPO = PACKAGE.parent

#: Files the lead is reworking that still hold a copy this module forbids, and which one;
#: each entry leaves once the file is fixed there (tested: an entry must still be needed).
LEAD_OWNED: dict[str, str] = {}

_DIGEST_COPY = re.compile(r"""["']sha256:["']\s*\+\s*hashlib\.sha256""")
# The one British spelling left is a reason code on the wire, which keeps its spelling.
_BRITISH = re.compile(r"(?<!admission_not_)normalis", re.IGNORECASE)


def _sources(*folders: Path, suffixes: tuple[str, ...] = (".py",)) -> dict[str, str]:
    return {
        str(path.relative_to(REPO)): path.read_text(encoding="utf-8")
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.suffix in suffixes and "__pycache__" not in path.parts
    }


def _digest_copies() -> set[str]:
    return {
        name
        for name, text in _sources(PACKAGE).items()
        if _DIGEST_COPY.search(text) and name != "external_query_service/_digests.py"
    }


def _british() -> set[str]:
    files = _sources(PACKAGE, REPO / "tests", REPO / "docs", suffixes=(".py", ".md", ".j2"))
    files["README.md"] = (REPO / "README.md").read_text(encoding="utf-8")
    return {name for name, text in files.items() if _BRITISH.search(text)}


def _allowed(kind: str) -> set[str]:
    return {name for name, what in LEAD_OWNED.items() if what == kind}


def test_the_guards_see_what_they_look_for() -> None:
    assert _DIGEST_COPY.search('x = "sha256:" + hashlib.sha256(data).hexdigest()')
    assert _BRITISH.search("the normalised text")
    assert _BRITISH.search("def normalise_text")
    assert not _BRITISH.search('raise ContractRejected("admission_not_normalised", "...")')


def test_sha256_digests_are_spelled_by_digests_py_alone() -> None:
    assert _digest_copies() - _allowed("digest") == set()


def test_normalize_has_one_spelling() -> None:
    assert _british() - _allowed("spelling") - {"tests/test_one_helper_each.py"} == set()


def test_every_lead_owned_exemption_is_still_needed() -> None:
    stale = (_allowed("digest") - _digest_copies()) | (_allowed("spelling") - _british())
    assert stale == set()


#: The one name two public classes share on purpose: the evidence verifier stage
#: (``stages.Verifier``) and the toolkit's protocol for checking a task's result
#: (``toolkit.Verifier``), which keep their names in their own modules.
SHARED_ON_PURPOSE = {
    "Verifier": [
        "external_query_service.toolkit._tasks",
        "external_query_service.verifier._verifier",
    ]
}


def test_no_two_public_classes_of_the_package_share_a_name() -> None:
    homes: dict[str, set[str]] = defaultdict(set)
    for module in package_modules():
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                homes[name].add(module.__name__)
    shared = {name: sorted(found) for name, found in homes.items() if len(found) > 1}
    assert shared == SHARED_ON_PURPOSE
