"""``external-query eval``: progress, table, scores, JSON and a self-contained HTML report."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from external_query_service.cli import main
from external_query_service.cli.eval import _Progress
from external_query_service.testing import CaseResult, find_case_files, load_cases
from tests.support.cases import EXAMPLES, support_an_answer


class _Rows(HTMLParser):
    """Case rows (``<tr id=...>``), details elements, and anything pointing outside."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[str] = []
        self.details = 0
        self.outside: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if tag == "tr" and found.get("id"):
            self.rows.append(str(found["id"]))
        if tag == "details":
            self.details += 1
        self.outside += [f"{tag} {k}" for k in ("src", "href") if k in found]


def example_ids() -> list[str]:
    return [case.id for path in find_case_files(EXAMPLES) for case in load_cases(path)]


def run_eval(cases: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["eval", str(cases), "--out", str(out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@dataclass(frozen=True)
class EvalRun:
    code: int
    out: str
    err: str
    reports: Path


@pytest.fixture(scope="module")
def example_eval(tmp_path_factory: pytest.TempPathFactory) -> EvalRun:
    """``external-query eval examples/cases`` once; the tests below read what it wrote."""
    reports = tmp_path_factory.mktemp("eval") / "report"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["eval", str(EXAMPLES), "--out", str(reports)])
    return EvalRun(code, out.getvalue(), err.getvalue(), reports)


@pytest.mark.usefixtures("https_worlds")
def test_eval_of_the_example_suite_passes_and_writes_both_reports(
    example_eval: EvalRun,
) -> None:
    ids = example_ids()

    assert example_eval.code == 0, example_eval.out
    assert f"[{len(ids)}/{len(ids)}] ok" in example_eval.err  # progress goes to stderr
    out = example_eval.out
    assert f"passed: {len(ids)}/{len(ids)}" in out
    assert "status confusion" in out
    assert "citation precision: 1.00" in out
    data = json.loads((example_eval.reports / "report.json").read_text("utf-8"))
    assert [case["id"] for case in data["cases"]] == ids
    assert data["scores"]["failed"] == 0
    assert data["scores"]["confusion"]["clarify"] == {"clarify": 2}


def test_html_report_parses_and_lists_every_case_with_its_audit(example_eval: EvalRun) -> None:
    page = (example_eval.reports / "report.html").read_text("utf-8")
    parser = _Rows()
    parser.feed(page)
    parser.close()

    assert parser.rows == example_ids()
    assert parser.details == len(parser.rows)
    assert "script" not in parser.tags
    assert parser.outside == []  # self-contained: nothing loaded from elsewhere
    assert "verifier.outcome" in page  # the audit is inside the details


@pytest.mark.usefixtures("https_worlds")
def test_eval_exits_1_and_scores_an_unsupported_answer_when_a_case_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "cases"
    shutil.copytree(EXAMPLES, cases)
    support_an_answer(cases / "worlds" / "zhanjiang-typhoon")

    code, out, err = run_eval(cases, tmp_path / "report", capsys)

    total = len(example_ids())
    assert code == 1
    assert "FAIL" in err
    assert "FAIL  typhoon_zh.toml::recent-typhoon-with-only-stale-evidence" in out
    scores = json.loads((tmp_path / "report" / "report.json").read_text("utf-8"))["scores"]
    assert scores["passed"] == total - 1
    assert scores["answered_unsupported"] == 1
    assert scores["confusion"]["insufficient_evidence"] == {
        "answered": 1,
        "insufficient_evidence": 1,
    }
    expected = (scores["answered_correct"] - 1) / total
    assert scores["truthfulness"] == pytest.approx(expected, abs=1e-4)


def test_eval_of_a_folder_without_cases_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_eval(tmp_path, tmp_path / "report", capsys)
    assert code == 2
    assert "no case files" in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_one_bar_redrawn_in_place(tmp_path: Path) -> None:
    path = tmp_path / "lost.toml"
    path.write_text('world = "nowhere"\n[[case]]\nname = "x"\nquestion = "q"\n', encoding="utf-8")
    (case,) = load_cases(path)
    stream = _Terminal()
    progress = _Progress(stream)
    progress(1, 2, CaseResult(case, None))
    progress(2, 2, CaseResult(case, None, error="broken"))
    assert stream.getvalue().count("\r[") == 2
    assert "[############------------] 1/2 ok" in stream.getvalue()
    assert "[########################] 2/2 FAIL lost.toml::x" in stream.getvalue()
    assert stream.getvalue().endswith("\n")


def test_eval_names_cases_by_their_path_in_the_suite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite"
    for folder in ("zh", "en"):
        (suite / folder).mkdir(parents=True)
        (suite / folder / "cases.toml").write_text(
            'world = "nowhere"\n[[case]]\nname = "x"\nquestion = "q"\n', encoding="utf-8"
        )
    code, out, _ = run_eval(suite, tmp_path / "report", capsys)
    assert code == 1  # a case whose world is missing fails
    data = json.loads((tmp_path / "report" / "report.json").read_text("utf-8"))
    assert [case["id"] for case in data["cases"]] == ["en/cases.toml::x", "zh/cases.toml::x"]
    assert "FAIL  en/cases.toml::x" in out
    parser = _Rows()
    parser.feed((tmp_path / "report" / "report.html").read_text("utf-8"))
    assert parser.rows == ["en/cases.toml::x", "zh/cases.toml::x"]


def test_eval_explains_every_figure_in_one_line(example_eval: EvalRun) -> None:
    legend = example_eval.out.split("what the figures mean:\n", 1)[1].splitlines()
    explained = {line.split("  ")[1].strip(): line for line in legend if line.startswith("  ")}
    assert set(explained) == {"passed", "truthfulness", "citation precision", "status confusion"}
    assert (
        "answered and correct − answered where the case expects no answer"
        in (explained["truthfulness"])
    )
    assert "admitted evidence / displayed sources" in explained["citation precision"]


def test_eval_says_where_it_wrote_the_report(example_eval: EvalRun) -> None:
    assert example_eval.out.endswith(
        f"report: {example_eval.reports / 'report.json'} (and report.html beside it)\n"
    )


@pytest.mark.usefixtures("https_worlds")
def test_eval_without_out_writes_into_eval_report_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["eval", str(EXAMPLES / "weather_zh.toml")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.endswith("report: eval-report/report.json (and report.html beside it)\n")
    assert sorted(path.name for path in (tmp_path / "eval-report").iterdir()) == [
        "report.html",
        "report.json",
    ]
