"""Regression cases: the example suite holds, and a changed world fails with a clear diff."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from external_query_service import InputError
from external_query_service.models import ExternalAnswer
from external_query_service.testing import (
    Expectation,
    check_answer,
    find_case_files,
    load_cases,
    run_case,
)
from tests.support.cases import EXAMPLES, support_an_answer


def copy_suite(tmp_path: Path) -> Path:
    root = tmp_path / "cases"
    shutil.copytree(EXAMPLES, root)
    return root


@pytest.mark.usefixtures("https_worlds")
def test_every_example_case_passes() -> None:
    cases = [case for path in find_case_files(EXAMPLES) for case in load_cases(path)]
    assert len(cases) >= 7
    failed = [result.diff() for result in map(run_case, cases) if not result.passed]
    assert failed == []


def test_examples_hold_chinese_and_english_worlds() -> None:
    cases = [case for path in find_case_files(EXAMPLES) for case in load_cases(path)]
    markers = {marker for case in cases for marker in case.markers}
    assert {"zh", "en"} <= markers
    assert len({case.world.name for case in cases}) >= 4


@pytest.mark.usefixtures("https_worlds")
def test_insufficient_evidence_case_fails_with_a_clear_diff_once_the_world_supports_an_answer(
    tmp_path: Path,
) -> None:
    root = copy_suite(tmp_path)
    case = load_cases(root / "typhoon_zh.toml")[0]
    assert run_case(case).passed  # as shipped: only stale evidence

    support_an_answer(root / "worlds" / "zhanjiang-typhoon")
    result = run_case(case)

    assert not result.passed
    assert result.status == "answered"
    diff = result.diff()
    assert "case typhoon_zh.toml::recent-typhoon-with-only-stale-evidence: FAILED" in diff
    assert "  status:\n    expected: insufficient_evidence\n    actual:   answered" in diff
    assert "  reason:\n    expected: out_of_time_range\n    actual:   None" in diff
    assert "news.example.cn" in diff.split("  sources:")[1]
    assert "verifier checks:" in diff
    assert "✓ time" in diff  # the check that now passes is shown


def test_case_file_errors_name_the_file_and_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[case]]\nname = "x"\nquestion = "q"\n', encoding="utf-8")
    with pytest.raises(InputError, match="names no world"):
        load_cases(path)
    path.write_text(
        'world = "w"\n[[case]]\nname = "x"\nquestion = "q"\n[case.expect]\nstatuz = "answered"\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match=r"bad\.toml: case\.0\.expect\.statuz: unknown key"):
        load_cases(path)
    path.write_text(
        'world = "w"\n[[case]]\nname = "x"\nquestion = "q"\n[[case]]\nname = "x"\nquestion = "q"\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="unique"):
        load_cases(path)


def test_a_case_whose_world_is_missing_is_an_error_result(tmp_path: Path) -> None:
    path = tmp_path / "lost.toml"
    path.write_text('world = "nowhere"\n[[case]]\nname = "x"\nquestion = "q"\n', encoding="utf-8")
    result = run_case(load_cases(path)[0])
    assert not result.passed
    assert result.status == "error"
    assert "not a world" in (result.error or "")


def test_world_manifests_are_not_mistaken_for_case_files() -> None:
    found = find_case_files(EXAMPLES)
    assert found
    assert all(path.name != "world.toml" for path in found)


@pytest.fixture(scope="module")
def rust_answer(https_worlds: None) -> ExternalAnswer:
    """The English web answer: two sites shown; the oversized third page gives nothing."""
    result = run_case(load_cases(EXAMPLES / "english.toml")[0])
    assert result.passed, result.diff()
    assert result.answer is not None
    return result.answer


@pytest.mark.usefixtures("https_worlds")
def test_an_empty_expectation_accepts_any_answer(rust_answer: ExternalAnswer) -> None:
    assert check_answer(Expectation(), rust_answer) == []


@pytest.mark.parametrize(
    ("field", "value", "what"),
    [
        ("status", "clarify", "status"),
        ("reason", "filtered_out", "reason"),
        ("contract", "direct_fact", "contract"),
        ("sites", ["blog.rust-lang.example", "nowhere.example"], "sites shown"),
        ("not_sites", ["devnews.example.com"], "sites not shown or admitted"),
        ("min_sources", 4, "sources"),
        ("answer_contains", ["Rust 1.80.0", "Rust 2.0"], "answer text"),
        ("answer_excludes", ["LazyLock"], "answer text"),
        ("evidence_contains", ["July 25, 2024", "June 13, 2024"], "admitted evidence"),
        ("evidence_excludes", ["Ignore all previous instructions"], "admitted evidence"),
    ],
)
def test_each_expectation_reports_the_answer_that_misses_it(
    rust_answer: ExternalAnswer, field: str, value: Any, what: str
) -> None:
    mismatches = check_answer(Expectation.model_validate({field: value}), rust_answer)
    assert [item.what for item in mismatches] == [what]
    if isinstance(value, list):  # names only what is missing or present, not the rest
        assert mismatches[0].expected.endswith(f"{[value[-1]]}")


@pytest.mark.usefixtures("https_worlds")
def test_each_expectation_accepts_the_answer_that_meets_it(rust_answer: ExternalAnswer) -> None:
    expect = Expectation(
        status="answered",
        contract="summary_with_sources",
        sites=("blog.rust-lang.example", "devnews.example.com"),
        not_sites=("evil.example", "mirror.example.net"),
        min_sources=2,
        answer_contains=("July 25, 2024",),
        answer_excludes=("evil.example",),
        evidence_contains=("Ignore all previous instructions",),  # admitted as data
        evidence_excludes=("June 13, 2024",),
    )
    assert check_answer(expect, rust_answer) == []


@pytest.mark.usefixtures("https_worlds")
def test_a_case_now_overrides_the_world_clock(tmp_path: Path) -> None:
    world = (EXAMPLES / "worlds" / "usd-cny").resolve()
    path = tmp_path / "later.toml"
    path.write_text(
        f'world = "{world.as_posix()}"\nnow = "2026-12-03T09:00:00+08:00"\n'
        '[[case]]\nname = "rate"\nquestion = "USD to CNY?"\n'
        'semantics = { query_kind = "exchange_rate", entities = ["USD", "CNY"] }\n',
        encoding="utf-8",
    )
    result = run_case(load_cases(path)[0])
    assert result.answer is not None
    assert [item.accessed_at for item in result.answer.evidence] == [
        datetime(2026, 12, 3, 1, 0, tzinfo=UTC)
    ]


def test_case_ids_name_the_file_relative_to_the_suite(tmp_path: Path) -> None:
    for folder in ("zh", "en"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "weather.toml").write_text(
            'world = "w"\n[[case]]\nname = "tomorrow"\nquestion = "q"\n', encoding="utf-8"
        )
    ids = [
        case.id for path in find_case_files(tmp_path) for case in load_cases(path, root=tmp_path)
    ]
    assert ids == ["en/weather.toml::tomorrow", "zh/weather.toml::tomorrow"]
    assert load_cases(tmp_path / "zh" / "weather.toml")[0].id == "weather.toml::tomorrow"
