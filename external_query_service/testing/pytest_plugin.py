"""pytest plugin (entry point ``pytest11``): regression cases as test items.

Opt-in, so no run picks up a folder by surprise:

- ``--external-query-cases DIR`` (repeatable) collects the case files under ``DIR``, and
  only them: the run's default paths (``testpaths``, or the current folder) are left out,
  so ``pytest --external-query-cases examples/cases`` runs the cases alone. Paths named on
  the command line as well are still collected beside them;
- the ini option ``external_query_cases`` (paths) marks folders whose case files are
  collected when pytest walks them (name the folder, or list it in ``testpaths``).

pytest loads this module in every run of every project in the environment, so it imports
nothing but pytest: the case machinery (``testing._plugin``, and with it the whole answer
chain) is imported only once a run names a case folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ._plugin import CaseFile

__all__ = [
    "INI",
    "MARKER",
    "OPTION",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_configure",
]

INI = "external_query_cases"
OPTION = "--external-query-cases"
MARKER = "external_case"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--external-query-cases DIR`` and the ``external_query_cases`` ini option."""
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
    """Register the case marker and collect the folders named on the command line (those
    alone, unless paths were named too)."""
    config.addinivalue_line("markers", f"{MARKER}: a regression case run against its world")
    given = [str(Path(item)) for item in config.getoption(OPTION)]
    if not given:
        return
    # The run's paths came from testpaths or the current folder, not from the caller: the
    # case folders replace them. Paths the caller named stay, the folders added beside them.
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        config.args[:] = []
    for text in given:
        if text not in config.args:
            config.args.append(text)


def _case_roots(config: pytest.Config) -> list[Path]:
    ini: list[Path] = list(config.getini(INI))
    given = [Path(item) for item in config.getoption(OPTION)]
    invocation = config.invocation_params.dir
    return [path.resolve() for path in ini] + [(invocation / path).resolve() for path in given]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> CaseFile | None:
    """A case-file collector for a ``.toml`` file under a named case folder, else None."""
    roots = _case_roots(parent.config)
    if not roots or file_path.suffix != ".toml":
        return None
    resolved = file_path.resolve()
    if not any(resolved.is_relative_to(root) for root in roots):
        return None
    from ._plugin import collect_case_file  # the first case file pays for the chain

    return collect_case_file(file_path, parent, MARKER)
