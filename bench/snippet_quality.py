"""Does the first snippet hold the answer? DuReader questions from a corpus.

    python bench/snippet_quality.py [CORPUS_DIR] [SET]

CORPUS_DIR defaults to $EQS_CORPUS. The corpus is not part of the repository and nothing
outside it is read unless named: with neither given, the script says so and measures nothing.
SET is the folder of question files under ``CORPUS_DIR/qa``: ``dureader_zh`` (the 25, the
default) or ``dureader_train`` (the DuReader trainset ``bench/ranking.py`` ranks, served here
the way the 25 are, so the two benches can be compared).

Each question's documents stand for the pages gathered for it (paragraphs joined with "\\n"),
and go through the same two passes as the page chain:

1. per page: ``chunk_text`` then ``score_with_stats`` against the question; the page keeps its
   two best chunks scoring at least ``PAGE_MIN_SCORE`` (``analyse_page``);
2. across pages: ``rerank`` scores the kept snippets again over the term statistics of every
   chunk of every page, each snippet with what the page chain gives the ranker: its page's
   title, the page's place in the results (the documents' order) and its offset on the page;
   its order is the evidence order (``evidence[0]`` first).

Hit rule. A snippet is a hit when
- the question has entity answers: it contains any of them (NFKC + case-folded substring);
- otherwise: for some reference answer, at least half of the distinct character bigrams of
  its first 80 characters (whitespace removed, folded) occur in the snippet.

Then the same questions **served end to end**: the service itself on loopback (``testing.World``),
each document an HTML article page (``testing.article``: navigation, banner, sidebar and
footer around its paragraphs) listed in the documents' order by the world's search engine;
judged on ``answer.evidence``: evidence[0] holds an answer, answered with the answer nowhere in
the evidence, refused (``insufficient_evidence``). This is what a user gets, and what
``bench/ranking.py`` measures on the same pages (the raw-text pass above skips extraction, so
no page title heads a page's text there and the ranker sees other features than it was
fitted on).

Printed: top-1 / top-2 / top-3 of the final order; the refusals (the first kept snippet is
not judged to answer: ``_rerank.answered``) as ``bench/ranking.py`` counts them — answered with
the answer first, answered with the answer nowhere in the kept snippets, refused although a kept
snippet held it; "all chunks" (every chunk of every page
scored with the question's statistics, no per-page cut); the baseline (the first paragraph of
the first document); the ceilings (some chunk hits; some kept snippet hits); and where scores
fall — the best kept snippet of hits and misses, and each page's best chunk against its own
question versus against the next three questions (to place ``PAGE_MIN_SCORE``).

Then, for English and Chinese alike, a retrieval check of the same scorer on the corpus pages
with a ground-truth body (``INDEX.json``): every page's body is chunked, and each page's title
is scored as the query against all chunks of all pages of its language; a hit is when the best
chunk comes from the title's own page. (About a minute: each title re-cuts every chunk.)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from external_query_service import ExternalQueryService
from external_query_service.adapters._pages import PAGE_MIN_SCORE
from external_query_service.testing import World, article, hit
from external_query_service.text._chunk import chunk_text
from external_query_service.text._rerank import Candidate, answered, rerank
from external_query_service.text._score import (
    TermStats,
    pages_stats,
    score_chunks,
    score_with_stats,
)

ANSWER_PREFIX = 80
BIGRAM_SHARE = 0.5
SNIPPETS_PER_PAGE = 2


def corpus_dir(argument: str | None) -> Path | None:
    """The corpus folder: the argument, else $EQS_CORPUS, else None."""
    named = argument or os.environ.get("EQS_CORPUS")
    return Path(named) if named else None


def fold(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def bigrams(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)}


def make_judge(question: dict[str, object]):  # type: ignore[no-untyped-def]
    entities = [
        fold(name)
        for group in (question.get("entity_answers") or [])
        for name in group  # type: ignore[union-attr]
        if fold(name)
    ]
    answers = [bigrams(fold(a)[:ANSWER_PREFIX]) for a in question["answers"]]  # type: ignore[union-attr]
    answers = [a for a in answers if a]

    def hit(snippet: str) -> bool:
        text = fold(snippet)
        if entities:
            return any(name in text for name in entities)
        grams = bigrams(text)
        return any(len(a & grams) >= BIGRAM_SHARE * len(a) for a in answers)

    return hit, bool(entities)


def pages_of(question: dict[str, object]) -> list[str]:
    texts = []
    for document in question["documents"]:  # type: ignore[union-attr]
        paragraphs = [p for p in document["paragraphs"] if p.strip()]
        if paragraphs:
            texts.append("\n".join(paragraphs))
    return texts


def titles_of(question: dict[str, object]) -> list[str]:
    """The titles of the documents ``pages_of`` keeps, in the same order."""
    return [
        str(document.get("title", ""))
        for document in question["documents"]  # type: ignore[union-attr]
        if any(p.strip() for p in document["paragraphs"])
    ]


def spread(label: str, values: list[int]) -> str:
    if not values:
        return f"{label}: none"
    values = sorted(values)
    tenth = values[len(values) // 10]
    return (
        f"{label}: n {len(values)}, min {values[0]}, 10th pct {tenth}, "
        f"median {statistics.median(values):.0f}, max {values[-1]}"
    )


def main() -> int:
    root = corpus_dir(sys.argv[1] if len(sys.argv) > 1 else None)
    if root is None:
        print("no corpus given (pass CORPUS_DIR or set EQS_CORPUS); nothing to do")
        return 0
    name = sys.argv[2] if len(sys.argv) > 2 else "dureader_zh"
    files = sorted((root / "qa" / name).glob("*.json"))
    loaded = [json.loads(path.read_text(encoding="utf-8")) for path in files]
    # A set's folder may hold an index beside the questions.
    questions = [item for item in loaded if isinstance(item, dict) and "documents" in item]
    if not questions:
        print(f"no DuReader questions under {root} (set EQS_CORPUS or pass a path); nothing to do")
        return 0
    top = [0, 0, 0]
    first = nowhere = refused = 0
    whole = base = ceiling = kept_ceiling = entity_questions = 0
    hit_scores: list[int] = []
    miss_scores: list[int] = []
    own_best: list[int] = []
    other_best: list[int] = []
    for number, question in enumerate(questions):
        hit, by_entity = make_judge(question)
        entity_questions += by_entity
        texts = pages_of(question)
        titles = titles_of(question)
        base += bool(texts) and hit(texts[0].split("\n", 1)[0])
        pages: list[tuple[TermStats, list[str]]] = []
        kept: list[Candidate] = []
        every_chunk = []
        for rank, (text, title) in enumerate(zip(texts, titles, strict=True)):
            chunks = chunk_text(text)
            every_chunk += chunks
            scored, page_stats = score_with_stats(chunks, question["question"])
            if scored:
                own_best.append(scored[0].score)
            picked = [s for s in scored if s.score >= PAGE_MIN_SCORE][:SNIPPETS_PER_PAGE]
            pages.append((page_stats, [s.chunk.text for s in picked]))
            kept += [
                Candidate(s.chunk.text, question["question"], title, rank, s.chunk.offset)
                for s in picked
            ]
        for step in (1, 2, 3):
            unrelated = questions[(number + step) % len(questions)]["question"]
            for text in texts:
                scored = score_chunks(chunk_text(text), unrelated)
                if scored:
                    other_best.append(scored[0].score)
        stats = pages_stats(pages)
        order = rerank(kept, stats)
        firsts = [kept[item.index].text for item in order[:3]]
        for k in range(3):
            top[k] += any(hit(text) for text in firsts[: k + 1])
        if order:
            (hit_scores if hit(firsts[0]) else miss_scores).append(order[0].score)
        holds = any(hit(passage.text) for passage in kept)
        answers = answered(order)
        first += answers and bool(firsts) and hit(firsts[0])
        nowhere += answers and not holds
        refused += not answers and holds
        overall = score_chunks(every_chunk, question["question"], stats=stats)
        whole += bool(overall) and hit(overall[0].chunk.text)
        ceiling += any(hit(chunk.text) for chunk in every_chunk)
        kept_ceiling += any(hit(passage.text) for passage in kept)
    n = len(questions)
    print(f"questions: {n} ({entity_questions} judged by entity answers, the rest by bigrams)")
    for k, label in enumerate(("evidence[0]", "evidence[:2]", "evidence[:3]")):
        print(f"{label:<14} holds an answer:   {top[k]}/{n} = {top[k] / n:.0%}")
    print(
        f"ranker's threshold: answered with the answer first {first}/{n} = {first / n:.0%}, "
        f"answered with it nowhere in the kept snippets {nowhere}/{n} = {nowhere / n:.0%}, "
        f"refused although a kept snippet held it {refused}/{n} = {refused / n:.0%}"
    )
    print(f"all chunks, best one:          {whole}/{n} = {whole / n:.0%}")
    print(f"baseline first paragraph:      {base}/{n} = {base / n:.0%}")
    print(f"ceiling (some kept snippet):   {kept_ceiling}/{n} = {kept_ceiling / n:.0%}")
    print(f"ceiling (some chunk):          {ceiling}/{n} = {ceiling / n:.0%}")
    print(spread("evidence[0] score when it hits", hit_scores))
    print(spread("evidence[0] score when it misses", miss_scores))
    print(spread(f"page's best chunk, own question (PAGE_MIN_SCORE {PAGE_MIN_SCORE})", own_best))
    print(spread("page's best chunk, an unrelated question (the next three)", other_best))
    below = sum(score < PAGE_MIN_SCORE for score in own_best)
    above = sum(score >= PAGE_MIN_SCORE for score in other_best)
    print(
        f"at PAGE_MIN_SCORE: {below}/{len(own_best)} pages fall below against their own "
        f"question, {above}/{len(other_best)} reach it against an unrelated one"
    )
    served_end_to_end(questions)
    if name == "dureader_zh":
        title_retrieval(root)
    return 0


def served_end_to_end(questions: list[dict[str, object]]) -> None:
    """The questions through the service on loopback (module docstring)."""
    first = nowhere = refused = 0
    with World() as world:
        for number, question in enumerate(questions):
            urls = [
                world.page(
                    f"q{number}-site{rank}.test",
                    "/page",
                    article(title, text.split("\n"), site_name=f"站点{rank}"),
                )
                for rank, (text, title) in enumerate(
                    zip(pages_of(question), titles_of(question), strict=True)
                )
            ]
            titles = titles_of(question)
            world.results(
                str(question["question"]),
                [hit(url, title, "") for url, title in zip(urls, titles, strict=True)],
            )
        settings = world.settings(world.searxng(), network={"max_pages": 8})
        with ExternalQueryService(settings) as service:
            for question in questions:
                hit_of, _ = make_judge(question)
                answer = service.answer(str(question["question"]))
                quotes = [item.snippet for item in answer.evidence]
                if answer.status != "answered":
                    refused += 1
                    continue
                first += bool(quotes) and hit_of(quotes[0])
                nowhere += not any(hit_of(quote) for quote in quotes)
    n = len(questions)
    print(
        f"served end to end: evidence[0] holds an answer {first}/{n} = {first / n:.0%}, "
        f"answered with it nowhere in the evidence {nowhere}/{n} = {nowhere / n:.0%}, "
        f"refused {refused}/{n} = {refused / n:.0%}"
    )


def title_retrieval(root: Path) -> None:
    index = root / "INDEX.json"
    if not index.is_file():
        return
    rows = json.loads(index.read_text(encoding="utf-8"))
    for lang in ("en", "zh"):
        chunks = []
        owners: list[int] = []
        titles: list[str] = []
        for row in rows:
            meta = json.loads((root / row["meta"]).read_text(encoding="utf-8"))
            body, title = meta.get("body"), row["title"]
            if row["lang"] != lang or not isinstance(body, str) or body in ("", "None"):
                continue
            if not title or title == "None":
                continue
            page_chunks = chunk_text(body)
            chunks += page_chunks
            owners += [len(titles)] * len(page_chunks)
            titles.append(title)
        owner_of = {id(chunk): owner for chunk, owner in zip(chunks, owners, strict=True)}
        found = sum(
            owner_of[id(score_chunks(chunks, title)[0].chunk)] == number
            for number, title in enumerate(titles)
        )
        print(
            f"{lang} pages, title -> best chunk on its own page: {found}/{len(titles)} = "
            f"{found / len(titles):.0%} ({len(chunks)} chunks)"
        )


if __name__ == "__main__":
    raise SystemExit(main())
