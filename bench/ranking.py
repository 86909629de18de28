"""Which passage comes first? A ranking benchmark over real and public QA sets.

    python bench/ranking.py [--dureader DIR] [--dureader-extra FILE ...] [--cmrc FILE]
                            [--drcd FILE] [--sample N] [--cache FILE] [--weights FILE]

Sets (none is part of the repository; each is measured only when present, and the script
says which are absent):

- DuReader 2.0 demo *trainset* (96 answerable search questions with their result documents,
  the form ``bench/snippet_quality.py`` reads): ``--dureader`` or ``$EQS_DUREADER_TRAIN``,
  else ``$EQS_CORPUS/qa/dureader_train``. The demo devset of that repository is never read.
- Further DuReader 2.0 *train* questions (samples of the full trainset in public
  repositories, the raw JSON-lines form, one question a line): ``--dureader-extra FILE``
  (repeatable) or ``$EQS_DUREADER_EXTRA`` (files joined by ``os.pathsep``). Those with an
  answer, each question id once and none of the trainset's own, are the set
  ``dureader_extra``: split by the same hash as the trainset (``family``), fitted on with it
  as one set, measured apart. Only train files: never a dev or test file.
- CMRC 2018 dev (``ymcui/cmrc2018``, ``squad-style-data/cmrc2018_dev.json``, simplified):
  ``--cmrc`` or ``$EQS_CMRC2018_DEV``.
- DRCD dev (``DRCKnowledgeTeam/DRCD``, ``DRCD_dev.json``, traditional): ``--drcd`` or
  ``$EQS_DRCD_DEV``.

Each question becomes the pages a search would return: its own documents (DuReader), or its
paragraph's page plus distractors — the other paragraphs of its article, then the paragraphs
of other articles closest to the question by BM25, ``PAGES`` in all, in an order shuffled by
a hash (CMRC, DRCD; ``--sample`` questions of each, chosen by a hash of their ids): an
engine's order is a hint to weigh, not an answer key, while DuReader's pages keep the order
its search engine gave them. CMRC and DRCD are also served a second time as the sets
``cmrc+asked`` and ``drcd+asked`` (``ASKED``): the same questions and pages, two of the pages
without the answer replaced by pages that only ask (``asking_page``: titled with the question,
their text the question again and the first sentence of the page they replace, as an
unanswered forum thread or a page written to be found reads), and for half the questions (by
a hash) every other page titled with the question, as a Q&A site restates it, so that a
question for a title is no sign either way. Such a set is measured apart and fitted on as
more questions of its own set (``family``). Every page
is rendered as a real HTML article with navigation, a cookie banner, a sidebar and a footer
around the text (``testing.article``) and goes through the page chain: ``analyse_page``
(decode, extract, chunk, score; the page keeps its best snippets at ``PAGE_MIN_SCORE``), then
the second pass over every page's term statistics. Judged by ``snippet_quality.make_judge``
(DuReader) or by the gold answer's text inside the passage (CMRC, DRCD).

Every set is split into a *fitting* and a *checking* half by a hash of the question id
(``half``); ``tools/fit_ranker.py`` fits on the fitting halves only. Printed per set and half:
evidence[0] holds an answer (top-1), top-3 and MRR for today's scorer (the rarity-weighted
coverage the second pass ranked by before the fitted ranker: ``score_chunks``), plain
Okapi BM25 (jieba tokens of the same pages' ≤ 360-character chunks, ``k1 = 1.2``,
``b = 0.75``) and the fitted ranker (``text._ranker``), the share of questions whose kept
evidence holds an answer, and the ranker's refusals: answered with the answer first, answered
with the answer nowhere in the kept evidence, refused although a kept passage held it.
Last, the ranker's CPU per question (process time, the best of ``CPU_RUNS`` passes over
every question): its features, then the model's probabilities of them. ``--weights`` reads
another model file than the packaged one (a former one, to compare).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import pickle
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from snippet_quality import make_judge, pages_of

from external_query_service.adapters._pages import PAGE_MIN_SCORE
from external_query_service.errors import ExtractionFailed
from external_query_service.testing.content import article
from external_query_service.text._analyse import PageAnalysis, analyse_page
from external_query_service.text._chunk import Chunk, chunk_text
from external_query_service.text._ranker import (
    RankerModel,
    RankerPassage,
    features,
    load_model,
    model_from_json,
)
from external_query_service.text._score import TermStats, pages_stats, score_chunks, term_stats
from external_query_service.text._tokens import terms

PAGES = 8
SAMPLE = 400
K1, B = 1.2, 0.75
HALVES = ("fitting", "checking")
METHODS = ("today", "bm25", "ranker")
#: Further DuReader train questions (``--dureader-extra``): measured apart, fitted with the
#: trainset's own.
EXTRA = "dureader_extra"
#: The suffix of a set served with pages that only ask (module docstring).
ASKED = "+asked"
#: How many of a question's pages without the answer only ask, in an ``ASKED`` set.
ASKING_PAGES = 2
CPU_RUNS = 3

Page = tuple[str, tuple[str, ...]]  # (title, paragraphs)


@dataclass(frozen=True)
class Question:
    """One question: its id, its pages (title, paragraphs) in search order, its judge."""

    set: str
    qid: str
    question: str
    pages: tuple[Page, ...]
    hit: Callable[[str], bool]


@dataclass
class Served:
    """What the page chain made of a question's pages: its kept snippets with the question's
    term statistics (so features can be computed again without serving the pages again),
    their ranker features and whether each holds an answer; today's order and BM25's, as
    hits."""

    set: str
    qid: str
    question: str = ""
    passages: list[RankerPassage] = field(default_factory=list)
    stats: TermStats = field(default_factory=TermStats)
    rows: list[list[float]] = field(default_factory=list)
    labels: list[bool] = field(default_factory=list)
    today: list[bool] = field(default_factory=list)
    bm25: list[bool] = field(default_factory=list)

    @property
    def half(self) -> str:
        return half(self.set, self.qid)


def half(name: str, qid: str) -> str:
    """``fitting`` or ``checking``, by a hash of the set (its family: further DuReader
    questions split as the trainset's own) and question id."""
    return HALVES[hashlib.sha256(f"{family(name)}:{qid}".encode()).digest()[0] % 2]


def family(name: str) -> str:
    """The set whose split and fitting weight a set shares: further DuReader train questions
    are more of the DuReader set, and a set served with pages that only ask more of its own."""
    return "dureader" if name == EXTRA else name.removesuffix(ASKED)


def fold(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


# -- sets --------------------------------------------------------------------------------


def dureader(folder: Path) -> list[Question]:
    return [
        _dureader_question("dureader", json.loads(path.read_text(encoding="utf-8")))
        for path in sorted(folder.glob("t*.json"))
    ]


def _dureader_question(name: str, item: dict[str, Any]) -> Question:
    hit, _ = make_judge(item)
    titles = [d["title"] for d in item["documents"] if any(p.strip() for p in d["paragraphs"])]
    texts = pages_of(item)
    pages = tuple((t, tuple(text.split("\n"))) for t, text in zip(titles, texts, strict=True))
    return Question(name, str(item["question_id"]), item["question"], pages, hit)


def dureader_extra(paths: Sequence[Path], known: set[str]) -> list[Question]:
    """Further DuReader *train* questions in the raw JSON-lines form (one question a line,
    ``question_id``, ``question``, ``answers``, ``documents`` with ``title`` and
    ``paragraphs``): those with an answer and a page with text, each question id once and
    none of ``known`` (the trainset's own)."""
    questions: dict[str, Question] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            qid = str(item["question_id"])
            answered = any(str(a).strip() for a in item.get("answers") or ())
            if qid in known or qid in questions or not answered or not pages_of(item):
                continue
            questions[qid] = _dureader_question(EXTRA, item)
    return list(questions.values())


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


Paragraph = tuple[str, str, str]  # (article key, title, context)
Asked = tuple[str, str, list[str], int]  # (qid, question, answers, paragraph index)


def read_squad(paths: Sequence[Path]) -> tuple[list[Paragraph], list[Asked]]:
    """Every paragraph of SQuAD-style files, and every question with an answer, in the order
    of a hash of its id (a sample is its first ones)."""
    paragraphs: list[Paragraph] = []
    asked: list[Asked] = []
    for path in paths:
        for number, entry in enumerate(json.loads(path.read_text(encoding="utf-8"))["data"]):
            key = f"{path.name}:{number}"
            for paragraph in entry["paragraphs"]:
                index = len(paragraphs)
                paragraphs.append((key, entry.get("title", ""), paragraph["context"]))
                for qa in paragraph["qas"]:
                    answers = [a["text"] for a in qa["answers"] if a["text"].strip()]
                    if answers:
                        asked.append((str(qa["id"]), qa["question"], answers, index))
    asked.sort(key=lambda item: _digest(item[0]))
    return paragraphs, asked


def squad(path: Path, name: str, sample: int) -> tuple[list[Question], list[Question]]:
    """``sample`` questions of a SQuAD-style file, each with ``PAGES`` pages; then the same
    questions as the set ``name + ASKED``: ``ASKING_PAGES`` of the pages without the answer
    only ask, and for half the questions every other page is titled with the question
    (module docstring)."""
    paragraphs, asked = read_squad([path])
    index = _Okapi([terms(context) for _, _, context in paragraphs])
    questions: list[Question] = []
    asking: list[Question] = []
    for qid, question, answers, own in asked[:sample]:
        article_no = paragraphs[own][0]
        chosen = [own] + [i for i, p in enumerate(paragraphs) if p[0] == article_no and i != own]
        chosen = chosen[:PAGES]
        if len(chosen) < PAGES:
            for i in index.best(terms(question)):
                if paragraphs[i][0] != article_no:
                    chosen.append(i)
                if len(chosen) == PAGES:
                    break
        # Shuffled (by a hash of the question and paragraph): a search engine's order is a
        # hint, and listing the pages by BM25 taught the ranker to follow the engine, so
        # that a related passage listed first beat the answer listed fourth. DuReader's
        # pages keep the order its engine gave them.
        chosen.sort(key=lambda i: _digest(f"{qid}:{i}"))
        pages = tuple((paragraphs[i][1], (paragraphs[i][2],)) for i in chosen)
        hit = _contains_any([fold(answer) for answer in answers])
        questions.append(Question(name, qid, question, pages, hit))
        asked_pages = _with_asking_pages(qid, question, pages, chosen.index(own))
        asking.append(Question(name + ASKED, qid, question, asked_pages, hit))
    return questions, asking


def _with_asking_pages(
    qid: str, question: str, pages: tuple[Page, ...], answering: int
) -> tuple[Page, ...]:
    """``pages`` with ``ASKING_PAGES`` of those other than ``answering`` made pages that only
    ask, chosen by a hash, and for half the questions (by a hash) the rest titled with the
    question."""
    others = sorted(
        (i for i in range(len(pages)) if i != answering),
        key=lambda i: _digest(f"asking:{qid}:{i}"),
    )
    asking = set(others[:ASKING_PAGES])
    restated = _digest(f"restated:{qid}")[0] in "01234567"
    return tuple(
        asking_page(question, " ".join(paragraphs))
        if i in asking
        else (question if restated else title, paragraphs)
        for i, (title, paragraphs) in enumerate(pages)
    )


def asking_page(question: str, text: str) -> Page:
    """A page that only asks ``question``: titled with it, its text the question again and
    ``text``'s first sentence, as an unanswered forum thread or a page written to be found
    reads."""
    return question, (question, first_sentence(text))


def first_sentence(text: str) -> str:
    """``text``'s first sentence (up to its first full stop, question or exclamation mark)."""
    for index, char in enumerate(text):
        if char in "。！？!?" or (char == "." and text[index + 1 : index + 2] in ("", " ")):
            return text[: index + 1]
    return text


def _contains_any(golds: list[str]) -> Callable[[str], bool]:
    return lambda text: any(gold in fold(text) for gold in golds)


class _Okapi:
    """Plain Okapi BM25 over token lists."""

    def __init__(self, documents: Sequence[Sequence[str]]) -> None:
        self.counts = [Counter(doc) for doc in documents]
        self.lengths = [len(doc) for doc in documents]
        self.average = sum(self.lengths) / max(len(self.lengths), 1)
        df: Counter[str] = Counter()
        for counts in self.counts:
            df.update(counts.keys())
        n = len(documents)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def scores(self, query: Sequence[str]) -> list[float]:
        wanted = set(query)
        out = []
        for counts, length in zip(self.counts, self.lengths, strict=True):
            norm = K1 * (1 - B + B * length / max(self.average, 1))
            out.append(
                sum(
                    self.idf[t] * counts[t] * (K1 + 1) / (counts[t] + norm)
                    for t in wanted
                    if counts[t]
                )
            )
        return out

    def best(self, query: Sequence[str]) -> list[int]:
        scores = self.scores(query)
        return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


# -- the page chain ----------------------------------------------------------------------


def article_analysis(
    title: str, paragraphs: Sequence[str], number: int, query: str
) -> PageAnalysis | None:
    """One page rendered as a real HTML article (site ``number``) and analysed for ``query`` as
    the page chain does; None when it holds no document."""
    body = article(title, list(paragraphs), site_name=f"站点{number}").encode("utf-8")
    try:
        return analyse_page(
            body,
            url=f"https://site{number}.test/page",
            declared_charset="utf-8",
            content_type="text/html",
            query=query,
            min_score=PAGE_MIN_SCORE,
        )
    except ExtractionFailed:
        return None


def serve(question: Question) -> Served:
    """Every page rendered as HTML and analysed as the page chain does (module docstring)."""
    pages: list[tuple[TermStats, list[str]]] = []
    chunks: list[str] = []
    kept: list[RankerPassage] = []
    for rank, (title, paragraphs) in enumerate(question.pages):
        analysis = article_analysis(title, paragraphs, rank, question.question)
        if analysis is None:
            continue
        pages.append((analysis.stats, [item.chunk.text for item in analysis.snippets]))
        chunks += [chunk.text for chunk in chunk_text(analysis.text)]
        kept += [
            RankerPassage(item.chunk.text, analysis.title, rank, item.chunk.offset)
            for item in analysis.snippets
        ]
    stats = pages_stats(pages)
    labels = [question.hit(passage.text) for passage in kept]
    # Today's scorer: the second pass as it was before the fitted ranker, every kept snippet
    # scored by rarity-weighted coverage over all the pages' statistics (the offset carries
    # its position).
    today = score_chunks(
        [Chunk(i, len(p.text), p.text) for i, p in enumerate(kept)], question.question, stats=stats
    )
    okapi = _Okapi([terms(text) for text in chunks])
    return Served(
        question.set,
        question.qid,
        question.question,
        kept,
        stats,
        rows=features(question.question, kept, stats),
        labels=labels,
        today=[labels[item.chunk.offset] for item in today],
        bm25=[question.hit(chunks[i]) for i in okapi.best(terms(question.question))],
    )


def orders(served: Served, model: RankerModel) -> dict[str, list[bool]]:
    """For each method, whether each passage of its order (best first) holds an answer."""
    scores = [model.score(row) for row in served.rows]
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return {
        "today": served.today,
        "bm25": served.bm25,
        "ranker": [served.labels[i] for i in ranked],
    }


def best_probability(served: Served, model: RankerModel) -> float:
    return max((model.probability(row) for row in served.rows), default=0.0)


# -- figures -----------------------------------------------------------------------------


@dataclass
class Tally:
    n: int = 0
    top1: int = 0
    top3: int = 0
    rr: float = 0.0

    def add(self, hits: list[bool]) -> None:
        self.n += 1
        first = next((rank for rank, hit in enumerate(hits) if hit), None)
        if first is not None:
            self.top1 += first == 0
            self.top3 += first < 3
            self.rr += 1 / (first + 1)

    def line(self, label: str) -> str:
        n = max(self.n, 1)
        return (
            f"  {label:<7} top-1 {self.top1:>3}/{self.n} = {self.top1 / n:6.1%}   "
            f"top-3 {self.top3 / n:6.1%}   MRR {self.rr / n:.3f}"
        )


def report(name: str, served: list[Served], model: RankerModel) -> None:
    for which in HALVES:
        part = [s for s in served if s.half == which]
        tallies = {method: Tally() for method in METHODS}
        kept = first = nowhere = refused = 0
        for item in part:
            for method, hits in orders(item, model).items():
                tallies[method].add(hits)
            holds = any(item.labels)
            kept += holds
            answers = best_probability(item, model) >= model.threshold
            ranked = orders(item, model)["ranker"]
            first += answers and bool(ranked) and ranked[0]
            nowhere += answers and not holds
            refused += not answers and holds
        n = max(len(part), 1)
        print(
            f"{name} {which} half: {len(part)} questions, kept evidence holds an answer "
            f"for {kept} ({kept / n:.1%})"
        )
        for method in METHODS:
            print(tallies[method].line(method))
        print(
            f"  ranker with threshold {model.threshold:.3f}: answered with the answer first "
            f"{first} ({first / n:.1%}), answered with it nowhere in the kept evidence "
            f"{nowhere} ({nowhere / n:.1%}), refused although kept evidence held it "
            f"{refused} ({refused / n:.1%})"
        )


def load_sets(args: argparse.Namespace) -> Iterator[tuple[str, list[Question]]]:
    corpus = os.environ.get("EQS_CORPUS")
    folder = args.dureader or os.environ.get("EQS_DUREADER_TRAIN")
    if not folder and corpus:
        folder = str(Path(corpus) / "qa" / "dureader_train")
    known: set[str] = set()
    if folder and any(Path(folder).glob("t*.json")):
        questions = dureader(Path(folder))
        known = {q.qid for q in questions}
        yield "dureader", questions
    else:
        print(
            "DuReader trainset absent (--dureader, $EQS_DUREADER_TRAIN or $EQS_CORPUS): "
            "not measured"
        )
    extra = args.dureader_extra or [
        name for name in os.environ.get("EQS_DUREADER_EXTRA", "").split(os.pathsep) if name
    ]
    present = [Path(name) for name in extra if Path(name).is_file()]
    if present:
        yield EXTRA, dureader_extra(present, known)
    elif extra:
        print("further DuReader train files absent (--dureader-extra): not measured")
    for name, given, env in (
        ("cmrc", args.cmrc, "EQS_CMRC2018_DEV"),
        ("drcd", args.drcd, "EQS_DRCD_DEV"),
    ):
        path = given or os.environ.get(env)
        if path and Path(path).is_file():
            plain, asking = squad(Path(path), name, args.sample)
            yield name, plain
            yield name + ASKED, asking
        else:
            print(f"{name} dev set absent (--{name} or ${env}): not measured")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dureader", help="folder of the DuReader trainset questions")
    parser.add_argument(
        "--dureader-extra",
        action="append",
        metavar="FILE",
        help="further DuReader train questions, raw JSON lines (repeatable)",
    )
    parser.add_argument("--cmrc", help="cmrc2018_dev.json")
    parser.add_argument("--drcd", help="DRCD_dev.json")
    parser.add_argument("--sample", type=int, default=SAMPLE, help="questions per CMRC/DRCD")
    parser.add_argument(
        "--cache", help="pickle of what the page chain kept: read if present, else written"
    )
    parser.add_argument("--weights", help="a ranker model file instead of the packaged one")
    return parser.parse_args(argv)


def served_sets(args: argparse.Namespace) -> list[tuple[str, list[Served]]]:
    """Every present set served through the page chain. With ``--cache``, what the page chain
    kept is read from that pickle when it exists, and only the ranker's features are computed
    again: a change of features is measured in seconds; a set named but not in the pickle is
    served and added to it."""
    cache = Path(args.cache) if args.cache else None
    sets: list[tuple[str, list[Served]]] = []
    if cache is not None and cache.is_file():
        stored: list[tuple[str, list[dict[str, Any]]]] = pickle.loads(cache.read_bytes())
        sets = [(name, [_unpacked(fields) for fields in items]) for name, items in stored]
        for _, served in sets:
            for item in served:
                item.rows = features(item.question, item.passages, item.stats)
    cached = {name for name, _ in sets}
    added = [
        (name, [serve(q) for q in questions])
        for name, questions in load_sets(args)
        if name not in cached
    ]
    if cache is not None and added:
        sets += added
        plain = [(name, [_packed(item) for item in served]) for name, served in sets]
        cache.write_bytes(pickle.dumps(plain))
    return sets or added


# The cache holds builtins only, not ``Served``, ``RankerPassage`` or ``TermStats``: the script
# may run as ``__main__`` or imported, and a cache outlives a move of the package's modules.


def _packed(item: Served) -> dict[str, Any]:
    return {
        **vars(item),
        "rows": [],
        "passages": [(p.text, p.title, p.page, p.offset) for p in item.passages],
        "stats": {
            "chunks": item.stats.chunks,
            "frequencies": dict(item.stats.frequencies.items()),
            "term_total": item.stats.term_total,
        },
    }


def _unpacked(fields: dict[str, Any]) -> Served:
    passages = [RankerPassage(*passage) for passage in fields["passages"]]
    kept = fields["stats"]
    # A cache written before the stats were counts holds every chunk's terms: still readable.
    stats = TermStats(**kept) if isinstance(kept, dict) else term_stats(kept)
    return Served(**{**fields, "passages": passages, "stats": stats})


def cpu(sets: list[tuple[str, list[Served]]], model: RankerModel) -> None:
    """The ranker's CPU per question over every question served (module docstring)."""
    served = [item for _, items in sets for item in items]
    best_features = best_model = math.inf
    for _ in range(CPU_RUNS):
        spent_features = spent_model = 0.0
        for item in served:
            start = time.process_time()
            rows = features(item.question, item.passages, item.stats)
            middle = time.process_time()
            for row in rows:
                model.probability(row)
            spent_features += middle - start
            spent_model += time.process_time() - middle
        best_features, best_model = min(best_features, spent_features), min(best_model, spent_model)
    n = max(len(served), 1)
    passages = sum(len(item.passages) for item in served) / n
    print(
        f"ranker CPU per question ({len(served)} questions, {passages:.1f} kept passages "
        f"each, {len(model.trees)} trees): features {1000 * best_features / n:.2f} ms, "
        f"model {1000 * best_model / n:.3f} ms"
    )


def ranker_of(weights: str | None) -> RankerModel:
    """The ranker in the weights file ``weights`` (``--weights``), else the packaged one."""
    return model_from_json(Path(weights).read_text(encoding="utf-8")) if weights else load_model()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    model = ranker_of(args.weights)
    sets = served_sets(args)
    for name, served in sets:
        report(name, served, model)
    if sets:
        cpu(sets, model)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
