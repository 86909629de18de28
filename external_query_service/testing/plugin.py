"""pytest plugin (entry point ``pytest11``): regression cases as test items.

Opt-in, so no run picks up a folder by surprise:

- ``--external-query-cases DIR`` (repeatable) collects the case files under ``DIR`` in
  this run, in addition to whatever else is collected;
- the ini option ``external_query_cases`` (paths) marks folders whose case files are
  collected when pytest walks them (name the folder, or list it in ``testpaths``).

Each ``[[case]]`` becomes one item (``cases.toml::name``), marked ``external_case`` plus
the case's own markers, so ``-k``, ``-m`` and xdist work as for any test. A failure shows
expected against actual, the sources, attempts and the verifier's checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cases import Case, CaseResult, is_case_file, load_cases, run_case

__all__ = ["CaseFailed", "CaseFile", "CaseItem"]

INI = "external_query_cases"
OPTION = "--external-query-cases"
MARKER = "external_case"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("external-query", "external_query_service regression cases")
    group.addoption(
        OPTION,
        action="append",
        default=[],
        metavar="DIR",
        help="collect the regression case files under DIR (repeatable)",
    )
    parser.addini(INI, type="paths", default=[], help="folders whose case files are collected")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: a regression case run against its world")
    given = [Path(item) for item in config.getoption(OPTION)]
    # Named on the command line: collect those folders in this run, like a path argument.
    for folder in given:
        text = str(folder)
        if text not in config.args:
            config.args.append(text)


def _case_roots(config: pytest.Config) -> list[Path]:
    ini: list[Path] = list(config.getini(INI))
    given = [Path(item) for item in config.getoption(OPTION)]
    invocation = config.invocation_params.dir
    return [path.resolve() for path in ini] + [(invocation / path).resolve() for path in given]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> CaseFile | None:
    roots = _case_roots(parent.config)
    if not roots or file_path.suffix != ".toml":
        return None
    resolved = file_path.resolve()
    if not any(resolved.is_relative_to(root) for root in roots) or not is_case_file(file_path):
        return None
    file: CaseFile = CaseFile.from_parent(parent, path=file_path)
    return file


class CaseFailed(Exception):
    """A case's answer did not meet its expectations."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.diff())
        self.result = result


class CaseFile(pytest.File):
    def collect(self) -> Iterator[CaseItem]:
        for case in load_cases(self.path):
            for marker in case.markers:
                self.config.addinivalue_line("markers", f"{marker}: a regression case marker")
            item: CaseItem = CaseItem.from_parent(self, name=case.name, case=case)
            item.add_marker(MARKER)
            for marker in case.markers:
                item.add_marker(marker)
            yield item


class CaseItem(pytest.Item):
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
