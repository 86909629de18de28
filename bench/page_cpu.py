"""CPU cost and quality of the page pipeline against plain trafilatura, on a page corpus.

    python bench/page_cpu.py [CORPUS_DIR] [--repeat N] [--json]

CORPUS_DIR defaults to $EQS_CORPUS. The corpus is not part of the repository and nothing
outside it is read unless named: with neither given, the script says so and measures nothing.

For every page in INDEX.json it measures (``time.process_time``):

- ours: ``analyse_page(body, ...)`` with the page title as the query (decode → extract →
  chunk → score → snippets → dates);
- baseline: ``trafilatura.extract(decoded_text)`` with default settings, on the text our
  decoder produced (decoding is not charged to the baseline).

It prints total and median CPU, the ratio, "garbled Chinese" counts (U+FFFD or
mojibake in the extracted text of a zh page) for ours vs trafilatura given the raw bytes,
token-F1 against the ground-truth body per set (one token per CJK character, whitespace tokens
otherwise) and token recall (the share of the body's tokens the text holds), how many pages
trafilatura read instead of the fast reading (``extractor``), the required/forbidden phrase
checks of ``trafilatura_eval``, and how often ``published_at`` matches a ground-truth date
where the set has one. Targets: CPU total <= 0.3x ``trafilatura.extract`` alone, recall not
below trafilatura's on any set. With ``--json`` the last line of output is one JSON object:
``ours_s`` and ``trafilatura_s`` (total CPU seconds), their ``ratio``, and per set the mean
F1 and recall of both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import time
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import trafilatura

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from external_query_service.errors import ExtractionFailed
from external_query_service.execution._analysis_pool import warm_pipeline
from external_query_service.text._analyse import analyse_page
from external_query_service.text._decode import decode_body
from external_query_service.text._extract import FAST_READER, extract_page

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ISO_DAY = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")


def corpus_dir(argument: str | None) -> Path | None:
    """The corpus folder: the argument, else $EQS_CORPUS, else None."""
    named = argument or os.environ.get("EQS_CORPUS")
    return Path(named) if named else None


def tokens(text: str) -> Counter[str]:
    return Counter(_TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()))


def token_f1(predicted: str, truth: str) -> float:
    return token_scores(predicted, truth)[0]


def token_scores(predicted: str, truth: str) -> tuple[float, float]:
    """Token F1 and recall of ``predicted`` against ``truth``."""
    got, want = tokens(predicted), tokens(truth)
    overlap = sum((got & want).values())
    if not overlap:
        return 0.0, 0.0
    precision, recall = overlap / sum(got.values()), overlap / sum(want.values())
    return 2 * precision * recall / (precision + recall), recall


def mean(values: list[float]) -> str:
    return f"{statistics.fmean(values):.3f}" if values else "-"


def garbled(text: str | None) -> bool:
    """U+FFFD, or mojibake: most non-ASCII letters of a Chinese page are not Han."""
    if not text:
        return False
    if "\ufffd" in text:
        return True
    non_ascii = [char for char in text if ord(char) > 127 and char.isalpha()]
    han = sum(1 for char in non_ascii if _HAN.match(char))
    return len(non_ascii) >= 50 and han < len(non_ascii) // 2


def truth_date(meta: dict[str, object]) -> date | None:
    raw: object = meta.get("date") or meta.get("published_time")
    expected = meta.get("expected_metadata")
    if not raw and isinstance(expected, dict):
        raw = expected.get("date")
    found = _ISO_DAY.search(str(raw)) if raw and raw != "None" else None
    if not found:
        return None
    try:
        return date(int(found[1]), int(found[2]), int(found[3]))
    except ValueError:
        return None


@dataclass
class SetStats:
    pages: int = 0
    f1_ours: list[float] = field(default_factory=list)
    f1_base: list[float] = field(default_factory=list)
    f1_raw: list[float] = field(default_factory=list)
    recall_ours: list[float] = field(default_factory=list)
    recall_base: list[float] = field(default_factory=list)
    by_trafilatura: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    garbled_ours: int = 0
    garbled_raw: int = 0
    garbled_base: int = 0
    phrases_ok: int = 0
    forbidden_ok: int = 0
    dated: int = 0
    date_hits: int = 0


def cpu(function, *args, repeat: int, **kwargs):  # type: ignore[no-untyped-def]
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        try:
            result = function(*args, **kwargs)
        except ExtractionFailed as exc:
            result = exc
        best = min(best, time.process_time() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", nargs="?")
    parser.add_argument("--repeat", type=int, default=1, help="time each call N times, keep min")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of totals")
    args = parser.parse_args()
    root = corpus_dir(args.corpus)
    if root is None:
        print("no corpus given (pass CORPUS_DIR or set EQS_CORPUS); nothing to do")
        return 0
    index_path = root / "INDEX.json"
    if not index_path.is_file():
        print(f"corpus not found at {root} (set EQS_CORPUS or pass a path); nothing to do")
        return 0
    rows = json.loads(index_path.read_text(encoding="utf-8"))

    # Warm both paths (lazy imports, compiled XPath, dictionaries) before timing anything:
    # ours as every analysis worker is warmed when it starts, trafilatura on the first page.
    warm = (root / rows[0]["html"]).read_bytes()
    trafilatura.extract(decode_body(warm).text)
    warm_pipeline()
    with contextlib.suppress(ExtractionFailed):
        analyse_page(warm, url="", declared_charset=None, content_type="text/html", query="x")

    with_snippets = 0
    ours_cpu: list[float] = []
    base_cpu: list[float] = []
    per_set: dict[str, SetStats] = defaultdict(SetStats)
    for row in rows:
        body = (root / row["html"]).read_bytes()
        meta = json.loads((root / row["meta"]).read_text(encoding="utf-8"))
        stats = per_set[row["dir"]]
        stats.pages += 1
        decoded = decode_body(body).text
        t_base, base = cpu(trafilatura.extract, decoded, repeat=args.repeat)
        t_ours, ours = cpu(
            analyse_page,
            body,
            url=row["url"] if row["url"] != "None" else "",
            declared_charset=None,
            content_type="text/html",
            query=row["title"] or "",
            repeat=args.repeat,
        )
        ours_cpu.append(t_ours)
        base_cpu.append(t_base)
        raw = trafilatura.extract(body)
        if isinstance(ours, ExtractionFailed):
            stats.failures[ours.reason] += 1
            ours_text, ours_date = "", None
        else:
            ours_text, ours_date = ours.text, ours.published_at
            with_snippets += bool(ours.snippets)
            stats.by_trafilatura += _read_by_trafilatura(decoded, row["url"], row["title"] or "")
        if row["lang"] == "zh":
            stats.garbled_ours += garbled(ours_text)
            stats.garbled_raw += garbled(raw)
            stats.garbled_base += garbled(base)
        truth = meta.get("body")
        if isinstance(truth, str) and truth and truth != "None":
            f1, recall = token_scores(ours_text, truth)
            stats.f1_ours.append(f1)
            stats.recall_ours.append(recall)
            f1, recall = token_scores(base or "", truth)
            stats.f1_base.append(f1)
            stats.recall_base.append(recall)
            stats.f1_raw.append(token_f1(raw or "", truth))
        if row["gt_type"] == "snippets_with_without":
            folded = " ".join(ours_text.split())
            must, must_not = meta["must_contain"], meta["must_not_contain"]
            stats.phrases_ok += all(" ".join(p.split()) in folded for p in must)
            stats.forbidden_ok += not any(" ".join(p.split()) in folded for p in must_not)
        expected = truth_date(meta)
        if expected is not None:
            stats.dated += 1
            stats.date_hits += ours_date == expected

    total_ours, total_base = sum(ours_cpu), sum(base_cpu)
    ratios = [o / b for o, b in zip(ours_cpu, base_cpu, strict=True) if b > 0]
    print(f"pages: {len(rows)}  (corpus: {root.name}, repeat={args.repeat})")
    print(f"CPU total   ours {total_ours:7.2f} s   trafilatura.extract {total_base:7.2f} s")
    print(
        f"CPU median  ours {statistics.median(ours_cpu) * 1000:7.1f} ms  "
        f"trafilatura.extract {statistics.median(base_cpu) * 1000:7.1f} ms"
    )
    print(
        f"ratio ours/baseline: total {total_ours / total_base:.2f}x, "
        f"median per page {statistics.median(ratios):.2f}x (target: total <= 0.3x)"
    )
    extracted = len(rows) - sum(sum(s.failures.values()) for s in per_set.values())
    print(f"pages with a snippet at MIN_SCORE (title as query): {with_snippets}/{extracted}")
    print()
    header = (
        f"{'set':<20}{'pages':>6}{'F1 ours':>9}{'F1 traf(dec)':>13}{'F1 traf(raw)':>13}"
        f"{'R ours':>8}{'R traf':>8}{'by traf':>8}{'garbled zh ours/raw/dec':>25}  failures"
    )
    print(header)
    for name in sorted(per_set):
        s = per_set[name]
        garble = f"{s.garbled_ours}/{s.garbled_raw}/{s.garbled_base}"
        failures = ", ".join(f"{k}={v}" for k, v in sorted(s.failures.items())) or "-"
        print(
            f"{name:<20}{s.pages:>6}{mean(s.f1_ours):>9}{mean(s.f1_base):>13}"
            f"{mean(s.f1_raw):>13}{mean(s.recall_ours):>8}{mean(s.recall_base):>8}"
            f"{s.by_trafilatura:>8}{garble:>25}  {failures}"
        )
    print()
    for name in sorted(per_set):
        s = per_set[name]
        if s.phrases_ok or s.forbidden_ok or name == "trafilatura_eval":
            print(
                f"{name}: all required phrases found on {s.phrases_ok}/{s.pages} pages, "
                f"all forbidden phrases absent on {s.forbidden_ok}/{s.pages}"
            )
    for name in sorted(per_set):
        s = per_set[name]
        if s.dated:
            print(f"{name}: published_at equals the ground-truth date on {s.date_hits}/{s.dated}")
    if args.json:
        summary = {
            "ours_s": round(total_ours, 3),
            "trafilatura_s": round(total_base, 3),
            "ratio": round(total_ours / total_base, 3),
            "sets": {
                name: {
                    "pages": s.pages,
                    "f1_ours": _rounded(s.f1_ours),
                    "f1_trafilatura": _rounded(s.f1_base),
                    "recall_ours": _rounded(s.recall_ours),
                    "recall_trafilatura": _rounded(s.recall_base),
                    "by_trafilatura": s.by_trafilatura,
                }
                for name, s in sorted(per_set.items())
            },
        }
        print(json.dumps(summary, separators=(",", ":")))
    return 0


def _rounded(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def _read_by_trafilatura(decoded: str, url: str, query: str) -> bool:
    """Whether trafilatura rather than the fast reading gave the page's text for ``query``
    (the title, as for ``analyse_page`` above; not timed)."""
    try:
        page = extract_page(decoded, url if url != "None" else "", query=query)
    except ExtractionFailed:
        return False
    return page.extractor != FAST_READER


if __name__ == "__main__":
    raise SystemExit(main())
