"""The pytest plugin: opt-in collection of case files, readable failures, -k, -m, xdist."""

from __future__ import annotations

import shutil
from pathlib import Path

# Imported here, before any in-process pytester run: pytester drops modules a run imported,
# and cryptography's Rust core cannot be imported twice in one process. hypothesis too:
# its pytest plugin imports it at the end of every run, about a second each time otherwise.
import hypothesis  # noqa: F401
import pytest
import trustme  # noqa: F401

from .test_testing_cases import EXAMPLES, support_an_answer

pytest_plugins = ["pytester"]

ALL_CASES = 7
ENGLISH_CASES = 4


@pytest.fixture
def cases(pytester: pytest.Pytester) -> Path:
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
    # hypothesis is no part of this run; its plugin would only add start-up time per process.
    result = pytester.runpytest_subprocess(
        "--external-query-cases", "cases", "-p", "xdist", "-n", "2", "-p", "no:hypothesispytest"
    )
    result.assert_outcomes(passed=ALL_CASES)
