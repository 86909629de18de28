"""The pytest plugin: opt-in collection of case files, readable failures, -k, -m, xdist."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

# Imported here, before any in-process pytester run: pytester drops modules a run imported,
# and cryptography's Rust core cannot be imported twice in one process. hypothesis too:
# its pytest plugin imports it at the end of every run, about a second each time otherwise.
# trustme (the testing extra) only where installed: without it no run imports cryptography.
import hypothesis  # noqa: F401
import pytest

with contextlib.suppress(ImportError):
    import trustme  # noqa: F401

from tests.support.cases import EXAMPLES, support_an_answer

pytest_plugins = ["pytester"]

ALL_CASES = 10
ENGLISH_CASES = 5
#: The installed plugins no part of a run in a fresh interpreter here: hypothesis's and
#: schemathesis's (which imports hypothesis) only add start-up time to each process, about
#: 1.5 s of CPU apiece.
OTHER_PLUGINS_OFF = ("-p", "no:hypothesispytest", "-p", "no:schemathesis")


@pytest.fixture
def cases(pytester: pytest.Pytester, https_worlds: None) -> Path:
    root = pytester.path / "cases"
    shutil.copytree(EXAMPLES, root)
    return root


def test_plugin_collects_and_reports_the_cases_of_the_ini_folder(
    pytester: pytest.Pytester, cases: Path
) -> None:
    pytester.makeini("[pytest]\nexternal_query_cases = cases\n")
    result = pytester.runpytest("cases", "-v")
    result.assert_outcomes(passed=ALL_CASES)
    result.stdout.fnmatch_lines(
        [
            "*cases/english.toml::rust-release-date-from-two-sites PASSED*",
            "*cases/weather_zh.toml::weather-tomorrow-from-the-fact-api PASSED*",
        ]
    )


def test_without_the_option_no_case_file_is_collected(
    pytester: pytest.Pytester, cases: Path
) -> None:
    result = pytester.runpytest("cases")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_command_line_option_collects_the_folder_and_k_selects(
    pytester: pytest.Pytester, cases: Path
) -> None:
    result = pytester.runpytest("--external-query-cases", "cases", "-k", "usd")
    result.assert_outcomes(passed=1)


def test_the_option_alone_collects_only_the_cases_not_the_testpaths(
    pytester: pytest.Pytester, cases: Path
) -> None:
    pytester.makeini("[pytest]\ntestpaths = suite\n")
    suite = pytester.mkdir("suite")
    (suite / "test_other.py").write_text("def test_other():\n    pass\n", encoding="utf-8")
    alone = pytester.runpytest("--external-query-cases", "cases", "-k", "usd or other")
    alone.assert_outcomes(passed=1)
    alone.stdout.no_fnmatch_line("*test_other*")
    beside = pytester.runpytest("suite", "--external-query-cases", "cases", "-k", "usd or other")
    beside.assert_outcomes(passed=2)  # a path named as well is still collected


def test_case_markers_select_with_m(pytester: pytest.Pytester, cases: Path) -> None:
    english = pytester.runpytest("--external-query-cases", "cases", "-m", "en")
    english.assert_outcomes(passed=ENGLISH_CASES)
    chinese = pytester.runpytest("--external-query-cases", "cases", "-m", "external_case and zh")
    chinese.assert_outcomes(passed=ALL_CASES - ENGLISH_CASES)


def test_failing_case_shows_expected_and_actual_status_sources_and_checks(
    pytester: pytest.Pytester, cases: Path
) -> None:
    support_an_answer(cases / "worlds" / "zhanjiang-typhoon")
    result = pytester.runpytest("--external-query-cases", "cases", "-k", "typhoon")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*case typhoon_zh.toml::recent-typhoon-with-only-stale-evidence: FAILED*",
            "*status:*",
            "*expected: insufficient_evidence*",
            "*actual:   answered*",
            "*sources:*",
            "*news.example.cn*",
            "*verifier checks:*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_cases_run_under_xdist(pytester: pytest.Pytester, cases: Path) -> None:
    result = pytester.runpytest_subprocess(
        "--external-query-cases", "cases", "-p", "xdist", "-n", "2", *OTHER_PLUGINS_OFF
    )
    result.assert_outcomes(passed=ALL_CASES)


HEAVY = ("trafilatura", "lxml", "jinja2", "httpx", "httpcore", "pydantic", "sqlite3")
CHEAP = {
    "external_query_service",
    "external_query_service._lazy",
    "external_query_service.testing",  # its names are imported on first access
    "external_query_service.testing.pytest_plugin",
}


def _modules_after_a_run(folder: Path, *args: str) -> set[str]:
    """Run pytest in a fresh interpreter in ``folder``; the module names loaded by its end."""
    (folder / "conftest.py").write_text(
        "import json, sys\n"
        "def pytest_sessionfinish(session):\n"
        "    with open('modules.json', 'w') as out:\n"
        "        json.dump(sorted(sys.modules), out)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *OTHER_PLUGINS_OFF, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    loaded: list[str] = json.loads((folder / "modules.json").read_text())
    return set(loaded)


def test_an_unrelated_pytest_run_imports_only_the_plugin_and_the_package_root(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_unrelated.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    loaded = _modules_after_a_run(tmp_path)
    ours = {name for name in loaded if name.split(".")[0] == "external_query_service"}
    assert "external_query_service.testing.pytest_plugin" in ours  # the entry point did load
    assert ours <= CHEAP, sorted(ours - CHEAP)
    assert not [name for name in loaded if name.split(".")[0] in HEAVY]


@pytest.mark.usefixtures("https_worlds")
def test_naming_a_case_folder_loads_the_case_machinery(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "cases")
    loaded = _modules_after_a_run(tmp_path, "--external-query-cases", "cases", "-k", "usd")
    # The service itself (trafilatura waits for the first page to extract; this case has none).
    assert {"external_query_service.testing._plugin", "external_query_service.service"} <= loaded
