"""What the verifier's bundle rules cost, and how often they find a disagreement that is there.

**Cost.** Builds ``--evidence`` admitted web evidence (news-length snippets, every fifth one
a copy of another, each stating a temperature and a release date) and times, in CPU
milliseconds (median of ``--runs``): ``copy_groups`` over them, ``value_conflicts`` for a
weather plan, and ``value_conflicts`` for a plan that asks for an event's date.

**Agreement**, when question sets are given (SQuAD-style JSON: CMRC 2018 dev/trial, DRCD
dev/test, SQuAD dev; files as arguments or ``$EQS_CMRC2018_DEV``, ``$EQS_DRCD_DEV``,
``$EQS_SQUAD_DEV``, several files joined with the path separator). Each question becomes
five admitted passages (news-length windows of its context around the answer, each cut a
little differently, on five sites), asked with the fallback plan (no semantics), judged by
the verifier and answered by the extractive presenter:

- ``altered``: two true passages and three altered copies, made the way counterfactual
  benchmarks make them: the answer span replaced by another answer of the same type (a
  number, a date, or other text) from another question of the set. Counted: *conflicts
  found* (``verifier.conflicts`` non-empty, or the outcome ``conflicting_evidence``).
- ``agreeing``: five passages that all hold the true answer. Counted: *false conflicts*.
  And *edited elsewhere*: the same, but two of them differ from the others in another
  answer span of the same context (when it has one), replaced as above: a figure the
  question is not about.
- ``parts``: two questions about different contexts joined into one (``q1？q2？``); five
  passages: the one answering the first part, two other paragraphs of its article (its
  subject, not its answer; for a set of one paragraph per article, its context's text away
  from the answer), the one answering the second part, and another paragraph of
  the second's article, ranked in that order. *With two unrelated*: the first's answer, one
  of its article's paragraphs, two passages of unrelated contexts, the second's answer.
  Counted: *parts answered* (every part's answer in ``answer.text``).

Every set is split into a *fitting* and a *checking* half by a hash of the question id;
the rules' constants are chosen on fitting halves only (``--fit`` prints the grid) and both
halves are printed. Pure functions on in-memory models: nothing is fetched, and no data is
kept in the repository.

    python bench/evidence_agreement.py [--evidence 40] [--runs 25]
        [--cmrc FILE] [--drcd FILE] [--squad FILE] [--sample 300] [--fit]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

from external_query_service.models import (
    Evidence,
    ExternalContextPacket,
    ExternalQueryPlan,
    GatherResult,
    TimeRange,
)
from external_query_service.presenter._extractive import ExtractivePresenter
from external_query_service.settings import Settings
from external_query_service.text._dates import date_spans
from external_query_service.text._quantities import find_quantities
from external_query_service.verifier import Verifier
from external_query_service.verifier import _values as values_module
from external_query_service.verifier._conflicts import value_conflicts
from external_query_service.verifier._copies import copy_groups

_ACCESSED = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
_PUBLISHED = date(2026, 11, 28)
HALVES = ("fitting", "checking")
SAMPLE = 300
#: How the five passages of a question are cut: characters kept before and after the
#: answer, as a share of the window (so each site's snippet starts and ends elsewhere).
_CUTS = ((0.5, 0.5), (0.4, 0.6), (0.6, 0.4), (0.35, 0.65), (0.55, 0.45))
_WINDOW = {"zh": 180, "en": 500}


#: Characters the filler of each snippet is drawn from (its own words, not a template's).
_POOL = (
    "港口集团表示新航道投入使用集装箱航线持续加密铁矿石粮食进港量"
    "增加明显今年货物吞吐量保持增长观察继续跟踪码头泊位运输铁路公路"
)


def _snippet(number: int) -> str:
    rng = random.Random(number)
    filler = "".join(rng.choice(_POOL) for _ in range(80))
    day = 18 + number % 3  # three opinions on the date, two on the temperature
    return (
        f"湛江港新航道已于2026年11月{day}日投入使用，当日最高气温{24 + 7 * (number % 2)}°C。"
        f"{filler}。"
    )


def _make(number: int, text: str, *, title: str = "") -> Evidence:
    return Evidence(
        evidence_id=f"ev-{number:012x}",
        adapter_id="searx",
        provider_type="live_search",
        basis="page_body",
        url=f"https://site{number}.example/a",
        site=f"site{number}.example",
        title=title,
        snippet=text,
        score=9000 - number,
        published_at=_PUBLISHED,
        accessed_at=_ACCESSED,
        content_digest="sha256:" + "0" * 64,
        raw_digest="sha256:" + "1" * 64,
    )


def _evidence(count: int) -> list[Evidence]:
    # Every fifth evidence copies the one before it (its text on another site).
    return [
        _make(n, _snippet(n - 1 if n % 5 == 4 else n), title="湛江港新航道") for n in range(count)
    ]


def _median_ms(runs: int, step: Callable[[], object]) -> float:
    samples = []
    for _ in range(runs):
        start = time.process_time()
        step()
        samples.append(time.process_time() - start)
    return statistics.median(samples) * 1000


def cost(evidence_count: int, runs: int) -> None:
    evidence = _evidence(evidence_count)
    ranked = [(item, ()) for item in evidence]
    day = TimeRange(start=date(2026, 11, 1), end=date(2026, 11, 30))
    weather = ExternalQueryPlan(
        question="湛江气温", query_kind="weather", search_queries=("湛江",), location="湛江"
    )
    event = ExternalQueryPlan(
        question="新航道哪天投入使用？",
        search_queries=("湛江港 新航道",),
        entities=("湛江港",),
        time_range=day,
        asked_value="event_date",
    )
    general = ExternalQueryPlan(question="新航道哪天投入使用？", search_queries=("新航道",))
    figures = {
        "copy_groups": _median_ms(runs, lambda: copy_groups(evidence)),
        "value_conflicts, weather": _median_ms(runs, lambda: value_conflicts(weather, ranked)),
        "value_conflicts, event_date": _median_ms(runs, lambda: value_conflicts(event, ranked)),
        "value_conflicts, generic_web": _median_ms(runs, lambda: value_conflicts(general, ranked)),
    }
    found = (len(copy_groups(evidence)), len(value_conflicts(event, ranked)))
    print(f"{evidence_count} evidence, median CPU of {runs} runs (ms)")
    for name, value in figures.items():
        print(f"{name:<30}{value:>9.2f}")
    print(f"copy groups found: {found[0]}; event-date disagreements found: {found[1]}")


# --- question sets --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Question:
    set: str
    qid: str
    question: str
    context: str
    answer: str
    start: int
    #: The other answers of the same context: (text, start).
    others: tuple[tuple[str, int], ...]
    #: The other paragraphs of the same article: about the same subject, not the answer.
    siblings: tuple[str, ...] = ()

    @property
    def half(self) -> str:
        return half(self.set, self.qid)

    @property
    def language(self) -> str:
        return "en" if self.set == "squad" else "zh"


def half(name: str, qid: str) -> str:
    """``fitting`` or ``checking``, by a hash of the set and the question id."""
    return HALVES[hashlib.sha256(f"{name}:{qid}".encode()).digest()[0] % 2]


def _rank(name: str, qid: str) -> bytes:
    return hashlib.sha256(f"sample:{name}:{qid}".encode()).digest()


def squad_style(paths: Sequence[Path], name: str, sample: int) -> list[Question]:
    found: list[Question] = []
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
        for article in data:
            contexts = [paragraph["context"] for paragraph in article["paragraphs"]]
            for paragraph in article["paragraphs"]:
                context = paragraph["context"]
                siblings = tuple(c for c in contexts if c != context)
                spans = [
                    (qa["answers"][0]["text"], qa["answers"][0]["answer_start"])
                    for qa in paragraph["qas"]
                    if qa.get("answers")
                ]
                for qa in paragraph["qas"]:
                    if not qa.get("answers") or qa.get("is_impossible"):
                        continue
                    text, start = qa["answers"][0]["text"], qa["answers"][0]["answer_start"]
                    if context[start : start + len(text)] != text or not text.strip():
                        continue
                    found.append(
                        Question(
                            name,
                            str(qa["id"]),
                            qa["question"].strip(),
                            context,
                            text,
                            start,
                            tuple(span for span in spans if span[1] != start),
                            siblings,
                        )
                    )
    found.sort(key=lambda q: _rank(name, q.qid))
    return found[:sample]


def load_sets(args: argparse.Namespace) -> Iterator[tuple[str, list[Question]]]:
    for name, given, env in (
        ("cmrc", args.cmrc, "EQS_CMRC2018_DEV"),
        ("drcd", args.drcd, "EQS_DRCD_DEV"),
        ("squad", args.squad, "EQS_SQUAD_DEV"),
    ):
        listed = given or [p for p in os.environ.get(env, "").split(os.pathsep) if p]
        present = [Path(p) for p in listed if Path(p).is_file()]
        if present:
            yield name, squad_style(present, name, args.sample)
        else:
            print(f"{name} set absent (--{name} or ${env}): not measured")


def _type(text: str) -> str:
    """The answer's type, as counterfactual sets keep it when they swap one: ``date`` (one
    date and little else), ``number:<unit word>`` (one number and the word after it),
    ``name`` (at most ten characters, no digit, nothing that ends a clause), or ``other``
    (never swapped)."""
    text = text.strip()
    dates = date_spans(text, reference=_PUBLISHED)
    if len(dates) == 1 and len(text) - (dates[0][1] - dates[0][0]) <= 2:
        return "date"
    numbers = find_quantities(text)
    if len(numbers) == 1 and numbers[0].start == 0 and len(text) - numbers[0].end <= 3:
        return f"number:{numbers[0].unit or text[numbers[0].end :].strip()}"
    words = text.split()
    short = len(text) <= 10 if not text.isascii() else len(words) <= 4
    if short and not any(char.isdigit() or char in "。，,；;：:！？!?" for char in text):
        return "name"
    return "other"


def _window(context: str, start: int, end: int, cut: tuple[float, float], size: int) -> str:
    room = max(0, size - (end - start))
    low = max(0, start - int(room * cut[0]))
    high = min(len(context), end + int(room * cut[1]))
    return context[low:high]


def _replacement(question: Question, pool: dict[str, list[str]], avoid: str) -> str | None:
    """Another question's answer of the same type (a hash picks it), not in ``avoid``."""
    kind = _type(question.answer)
    candidates = pool.get(kind, []) if kind != "other" else []
    if not candidates:
        return None
    at = int.from_bytes(_rank("swap", question.qid)[:4], "big")
    size = len(question.answer)
    for step in range(len(candidates)):
        other = candidates[(at + step) % len(candidates)]
        if not size / 2 <= len(other) <= size * 2:
            continue  # a name for a name of about its length
        if other != question.answer and other not in avoid and other not in question.question:
            return other
    return None


def _altered(question: Question, other: str) -> str:
    return (
        question.context[: question.start]
        + other
        + question.context[question.start + len(question.answer) :]
    )


def _passages(
    question: Question, context: str, answer_len: int, count: int, first: int = 0
) -> list[str]:
    size = _WINDOW[question.language]
    end = question.start + answer_len
    return [
        _window(context, question.start, end, _CUTS[(first + i) % len(_CUTS)], size)
        for i in range(count)
    ]


def _verify(
    question: str, texts: Sequence[str], language: str
) -> tuple[object, ExternalContextPacket]:
    plan = ExternalQueryPlan(question=question, search_queries=(question,), language=language)
    evidence = tuple(_make(n, text) for n, text in enumerate(texts))
    gathered = GatherResult(plan=plan, ranking=(), attempts=(), gathered=evidence)
    outcome = Verifier(Settings()).verify(gathered, now=_ACCESSED)
    packet = ExternalContextPacket(
        question=question,
        plan=plan,
        adapter_attempts=(),
        verified_evidence=outcome.admitted,
        verifier=outcome.result,
        uncertainties=outcome.uncertainties,
    )
    return outcome.result, packet


def _reported(result: object) -> bool:
    conflicts = getattr(result, "conflicts", ())
    return bool(conflicts) or getattr(result, "reason", None) == "conflicting_evidence"


@dataclass
class Tally:
    altered: int = 0
    found: int = 0
    agreeing: int = 0
    false: int = 0
    edited: int = 0
    false_edited: int = 0
    parts: int = 0
    answered: int = 0
    parts2: int = 0
    answered2: int = 0


def measure(questions: Sequence[Question], *, with_parts: bool = True) -> dict[str, Tally]:
    pool: dict[str, list[str]] = {}
    for q in questions:
        if len(q.answer) <= 24:
            pool.setdefault(_type(q.answer), []).append(q.answer)
    tallies = {which: Tally() for which in HALVES}
    presenter = ExtractivePresenter()
    for index, q in enumerate(questions):
        tally = tallies[q.half]
        true = _passages(q, q.context, len(q.answer), 5)
        other = _replacement(q, pool, q.context)
        if other is not None:
            changed = _altered(q, other)
            fake = _passages(q, changed, len(other), 3, first=2)
            result, _packet = _verify(
                q.question, [true[0], fake[0], true[1], fake[1], fake[2]], q.language
            )
            tally.altered += 1
            tally.found += _reported(result)
        result, _packet = _verify(q.question, true, q.language)
        tally.agreeing += 1
        tally.false += _reported(result)
        edited = _edited_elsewhere(q, pool, true)
        if edited is not None:
            result, _packet = _verify(q.question, edited, q.language)
            tally.edited += 1
            tally.false_edited += _reported(result)
        if not with_parts:
            continue
        # Parts: this question joined with the next one of another context.
        partner = next(
            (
                p
                for p in itertools.chain(questions[index + 1 :], questions[:index])
                if p.context != q.context
            ),
            None,
        )
        if partner is None:
            continue
        mark = "?" if q.language == "en" else "？"
        joined = f"{q.question.rstrip('?？')}{mark}{partner.question.rstrip('?？')}{mark}"
        size = _WINDOW[q.language]
        first = _passages(q, q.context, len(q.answer), 1)[0]
        second = _passages(partner, partner.context, len(partner.answer), 1, first=3)[0]
        # Passages about each part's subject that do not answer it (the article's other
        # paragraphs), ranked between: the first part's subject fills the top.
        near = _about(q, size)[:2]
        near_partner = _about(partner, size)[:1]
        if len(near) == 2 and near_partner:
            _result, packet = _verify(joined, [first, *near, second, *near_partner], q.language)
            text = presenter.present(packet).text
            tally.parts += 1
            tally.answered += q.answer in text and partner.answer in text
        unrelated = [
            u.context[:size]
            for u in itertools.chain(questions[index + 2 :], questions[:index])
            if u.context not in (q.context, partner.context)
        ][:2]
        if near and len(unrelated) == 2:
            _result, packet = _verify(joined, [first, near[0], *unrelated, second], q.language)
            text = presenter.present(packet).text
            tally.parts2 += 1
            tally.answered2 += q.answer in text and partner.answer in text
    return tallies


def _about(q: Question, size: int) -> list[str]:
    """Passages about the question's subject that do not hold its answer: its article's
    other paragraphs, else its context's text before and after the answer's window."""
    if q.siblings:
        return [c[:size] for c in q.siblings]
    end = q.start + len(q.answer)
    pieces = [
        q.context[max(0, q.start - 2 * size) : max(0, q.start - size)],
        q.context[end + size : end + 2 * size],
    ]
    return [piece for piece in pieces if len(piece) >= size // 3 and q.answer not in piece]


def _edited_elsewhere(q: Question, pool: dict[str, list[str]], true: list[str]) -> list[str] | None:
    """The five true passages, two of them with another answer span of the context (one
    at least a few characters from the asked one) replaced as the altered copies are."""
    elsewhere = next(((t, s) for t, s in q.others if abs(s - q.start) > len(q.answer) + 4), None)
    if elsewhere is None:
        return None
    moved = Question(q.set, q.qid + "/e", q.question, q.context, *elsewhere, ())
    swap = _replacement(moved, pool, q.context)
    if swap is None:
        return None
    edited = _altered(moved, swap)
    shift = len(swap) - len(elsewhere[0]) if elsewhere[1] < q.start else 0
    again = Question(q.set, q.qid, q.question, edited, q.answer, q.start + shift, ())
    return [*true[:3], *_passages(again, edited, len(q.answer), 2, first=3)]


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "-"


def report(name: str, tallies: dict[str, Tally]) -> None:
    for which in HALVES:
        t = tallies[which]
        print(
            f"{name:<6}{which:<9} conflicts found {_share(t.found, t.altered)}; "
            f"false conflicts {_share(t.false, t.agreeing)}, "
            f"edited elsewhere {_share(t.false_edited, t.edited)}; "
            f"parts answered {_share(t.answered, t.parts)}, "
            f"with two unrelated {_share(t.answered2, t.parts2)}"
        )


#: The constants ``--fit`` tries: words shared each side, question terms near the slot,
#: and how near.
_GRID = {
    "CONTEXT_WORDS": (2, 3, 4),
    "ASKED_TERMS": (1, 2, 3, 4),
    "WINDOW_WORDS": (12, 24, 48),
}


def fit(sets: list[tuple[str, list[Question]]]) -> None:
    """Each combination of ``_GRID`` on the fitting halves: conflicts found and false
    conflicts over all sets; among those with at most 2% false conflicts on agreeing
    passages, the best finds the most less its false conflicts on passages edited
    elsewhere."""
    fitting = [[q for q in questions if q.half == "fitting"] for _name, questions in sets]
    rows = []
    names = list(_GRID)
    for combination in itertools.product(*_GRID.values()):
        for key, value in zip(names, combination, strict=True):
            setattr(values_module, key, value)
        found = altered = false = agreeing = edited = false_edited = 0
        for questions in fitting:
            for t in measure(questions, with_parts=False).values():
                found, altered = found + t.found, altered + t.altered
                false, agreeing = false + t.false, agreeing + t.agreeing
                false_edited, edited = false_edited + t.false_edited, edited + t.edited
        row = (
            combination,
            found / max(altered, 1),
            false / max(agreeing, 1),
            false_edited / max(edited, 1),
        )
        rows.append(row)
        named = dict(zip(names, combination, strict=True))
        print(f"fit {named}: found {row[1]:.1%}, false {row[2]:.1%}, edited {row[3]:.1%}")
    allowed = [row for row in rows if row[2] <= 0.02] or rows
    best = max(allowed, key=lambda row: (row[1] - row[3], -row[2]))
    print(f"best on the fitting halves: {dict(zip(names, best[0], strict=True))}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--evidence", type=int, default=40)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--cmrc", action="append", metavar="FILE", help="CMRC 2018 dev/trial")
    parser.add_argument("--drcd", action="append", metavar="FILE", help="DRCD dev/test")
    parser.add_argument("--squad", action="append", metavar="FILE", help="SQuAD dev")
    parser.add_argument("--sample", type=int, default=SAMPLE, help="questions per set")
    parser.add_argument("--fit", action="store_true", help="print the grid on fitting halves")
    parser.add_argument("--no-cost", action="store_true", help="skip the CPU timing")
    args = parser.parse_args(argv)
    if not args.no_cost:
        cost(args.evidence, args.runs)
    sets = list(load_sets(args))
    if args.fit:
        fit(sets)
        return
    for name, questions in sets:
        report(name, measure(questions))


if __name__ == "__main__":
    main()
