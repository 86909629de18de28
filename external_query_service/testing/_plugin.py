"""Regression cases as pytest items: one ``CaseFile`` per case file, one ``CaseItem`` per
``[[case]]`` (``cases.toml::name``), marked ``external_case`` plus the case's own markers, so
``-k``, ``-m`` and xdist work as for any test. A failure shows expected against actual, the
sources, attempts and the verifier's checks.

The options and hooks live in ``external_query_service.testing.pytest_plugin``, which imports this
module only once a run names a case folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..errors import CaseFailed
from ._cases import Case, is_case_file, load_cases, run_case

__all__ = ["CaseFailed", "CaseFile", "CaseItem", "collect_case_file"]


def collect_case_file(file_path: Path, parent: pytest.Collector, marker: str) -> CaseFile | None:
    """The collector for ``file_path`` if it is a case file; its items carry ``marker``."""
    if not is_case_file(file_path):
        return None
    file: CaseFile = CaseFile.from_parent(parent, path=file_path)
    file.marker = marker
    return file


class CaseFile(pytest.File):
    """A case file as a pytest collector: one ``CaseItem`` per ``[[case]]``."""

    #: Set by ``collect_case_file``: the marker every item of the file carries.
    marker: str

    def collect(self) -> Iterator[CaseItem]:
        for case in load_cases(self.path):
            for name in case.markers:
                self.config.addinivalue_line("markers", f"{name}: a regression case marker")
            item: CaseItem = CaseItem.from_parent(self, name=case.name, case=case)
            item.add_marker(self.marker)
            for name in case.markers:
                item.add_marker(name)
            yield item


class CaseItem(pytest.Item):
    """One case as a pytest item: it runs the case and fails with its diff."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def runtest(self) -> None:
        result = run_case(self.case)
        self.user_properties.append(("status", result.status))
        if not result.passed:
            raise CaseFailed(result)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | Any:
        if isinstance(excinfo.value, CaseFailed):
            return excinfo.value.result.diff()
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"case {self.case.name}"
