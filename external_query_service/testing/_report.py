"""An evaluation as a text table, JSON, and one self-contained HTML page.

The HTML has no scripts and no outside links: one row per case, with the answer, the
mismatches, sources, verifier checks and the whole audit in a ``<details>`` element.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ._evaluation import STATUSES, EvalReport

__all__ = ["FIGURES", "render_html", "render_json", "render_table", "write_reports"]

#: One line per figure of the summary: what it counts (``evaluation.py`` defines them).
FIGURES = (
    ("passed", "cases whose answer met every expectation of its case"),
    (
        "truthfulness",
        "(answered and correct − answered where the case expects no answer) / all cases; -1 to +1",
    ),
    ("citation precision", "displayed sources that are admitted evidence / displayed sources"),
    ("status confusion", "rows: the status each case expects; columns: the status it got"),
)


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _columns(report: EvalReport) -> list[str]:
    seen = {actual for row in report.scores.confusion.values() for actual in row}
    return [*STATUSES, *sorted(seen - set(STATUSES))]


def render_table(report: EvalReport) -> str:
    """The summary a terminal shows: per-case lines, the confusion matrix, the scores."""
    scores = report.scores
    lines = []
    width = max((len(r.case.id) for r in report.results), default=10)
    for result in report.results:
        mark = "PASS" if result.passed else "FAIL"
        detail = (
            ""
            if result.passed
            else "  "
            + "; ".join(
                [m.what for m in result.mismatches] + ([result.error] if result.error else [])
            )
        )
        lines.append(f"{mark}  {result.case.id:<{width}}  {result.status}{detail}")
    columns = _columns(report)
    label = max([len("expected \\ actual"), *(len(k) for k in scores.confusion)])
    lines += ["", "status confusion (rows expected, columns actual):"]
    lines.append(" " * (label + 2) + "  ".join(f"{c:>21}" for c in columns))
    for expected, row in sorted(scores.confusion.items()):
        counts = "  ".join(f"{row.get(c, 0):>21}" for c in columns)
        lines.append(f"{expected:<{label}}  {counts}")
    lines += [
        "",
        f"passed: {scores.passed}/{scores.total}"
        + (f" ({scores.errors} errors)" if scores.errors else ""),
        f"truthfulness: {scores.truthfulness:+.2f} "
        f"(answered and correct {scores.answered_correct}, "
        f"answered but unsupported {scores.answered_unsupported})",
        f"citation precision: {_ratio(scores.citation_precision)} "
        f"({scores.displayed_admitted}/{scores.displayed_sources} displayed sources admitted)",
        "",
        "what the figures mean:",
    ]
    width = max(len(name) for name, _ in FIGURES)
    lines += [f"  {name:<{width}}  {meaning}" for name, meaning in FIGURES]
    return "\n".join(lines) + "\n"


def render_json(report: EvalReport) -> str:
    """``report`` as indented JSON text."""
    return json.dumps(report.as_dict(), ensure_ascii=False, indent=2) + "\n"


_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem; color: #222; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: .35rem .5rem; text-align: left;
         vertical-align: top; }
tr.pass td.result { color: #176b2c; font-weight: 600; }
tr.fail td.result { color: #a4161a; font-weight: 600; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .5rem; margin: .3rem 0; }
.scores td, .scores th { border: 1px solid #ccc; text-align: right; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _case_row(case: dict[str, Any]) -> str:
    expected = case["expected"]
    mismatches = "".join(
        f"<li>{_e(m['what'])}: expected {_e(m['expected'])}, actual {_e(m['actual'])}</li>"
        for m in case["mismatches"]
    )
    sources = "".join(
        f"<li>{_e(s['site'])} — {_e(s['title'])} — {_e(s['url'])}</li>" for s in case["sources"]
    )
    checks = "".join(
        f"<li>{'✓' if c['passed'] else '✗'} {_e(c['check'])} {_e(c['reason'])} "
        f"{_e(c.get('evidence_id') or '')} {_e(c.get('detail') or '')}</li>"
        for c in case["checks"]
    )
    error = f"<p>error: {_e(case['error'])}</p>" if case["error"] else ""
    status = case["status"] + (f" ({case['reason']})" if case["reason"] else "")
    details = (
        f"<details><summary>audit and answer</summary>{error}"
        f"<p>question: {_e(case['question'])}</p>"
        f"<p>world: {_e(case['world'])}</p>"
        + (f"<ul>{mismatches}</ul>" if mismatches else "")
        + f"<pre>{_e(case['text'])}</pre>"
        f"<h4>sources</h4><ul>{sources or '<li>(none)</li>'}</ul>"
        f"<h4>verifier checks</h4><ul>{checks or '<li>(none)</li>'}</ul>"
        f"<h4>audit</h4><pre>{_e(case['audit'])}</pre></details>"
    )
    passed = case["passed"]
    return (
        f'<tr class="{"pass" if passed else "fail"}" id="{_e(case["id"])}">'
        f"<td>{_e(case['id'])}</td>"
        f"<td>{_e(expected.get('status', 'any'))}</td>"
        f"<td>{_e(status)}</td>"
        f'<td class="result">{"pass" if passed else "FAIL"}</td>'
        f"<td>{details}</td></tr>"
    )


def render_html(report: EvalReport, *, title: str = "external-query eval") -> str:
    """``report`` as a self-contained HTML page (scores, confusion matrix, cases)."""
    data = report.as_dict()
    scores = data["scores"]
    columns = _columns(report)
    matrix = "".join(
        f"<tr><th>{_e(expected)}</th>"
        + "".join(f"<td>{row.get(c, 0)}</td>" for c in columns)
        + "</tr>"
        for expected, row in sorted(scores["confusion"].items())
    )
    rows = "".join(_case_row(case) for case in data["cases"])
    heads = "".join(f"<th>{_e(c)}</th>" for c in columns)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>{_e(title)}</h1>
<p>passed {scores["passed"]}/{scores["total"]} · truthfulness {scores["truthfulness"]:+.2f} ·
citation precision {_ratio(scores["citation_precision"])}</p>
<ul>{"".join(f"<li>{_e(name)}: {_e(meaning)}</li>" for name, meaning in FIGURES)}</ul>
<h2>status confusion</h2>
<table class="scores"><tr><th>expected \\ actual</th>{heads}</tr>
{matrix}</table>
<h2>cases</h2>
<table class="cases"><tr><th>case</th><th>expected</th><th>actual</th><th>result</th>
<th>details</th></tr>
{rows}
</table>
</body></html>
"""


def write_reports(report: EvalReport, folder: str | Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` into ``folder``; returns both paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / "report.json"
    html_path = folder / "report.html"
    json_path.write_text(render_json(report), encoding="utf-8")
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path
