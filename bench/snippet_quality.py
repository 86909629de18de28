"""Does the best-scored snippet hold the answer? DuReader questions from a corpus.

    python bench/snippet_quality.py [CORPUS_DIR]

CORPUS_DIR defaults to $EQS_CORPUS. The corpus is not part of the repository and nothing
outside it is read unless named: with neither given, the script says so and measures nothing.

For each question in ``qa/dureader_zh/*.json``: each document's paragraphs are joined with
"\\n" and chunked with ``chunk_text``; every chunk of every document is scored against the
question with ``score_chunks``; the best chunk across documents is the snippet.

Hit rule. A snippet is a hit when
- the question has entity answers: it contains any of them (NFKC + case-folded substring);
- otherwise: for some reference answer, at least half of the distinct character bigrams of
  its first 80 characters (whitespace removed, folded) occur in the snippet.

Baseline: the first paragraph of the first document, judged by the same rule. Also printed:
top-2 (the pipeline keeps two snippets per page), the ceiling (some chunk of some document
hits), and the best scores of hits and misses (to place ``MIN_SCORE``).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from external_query_service.text.chunk import Chunk, chunk_text
from external_query_service.text.score import MIN_SCORE, score_chunks

ANSWER_PREFIX = 80
BIGRAM_SHARE = 0.5


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


def main() -> int:
    root = corpus_dir(sys.argv[1] if len(sys.argv) > 1 else None)
    if root is None:
        print("no corpus given (pass CORPUS_DIR or set EQS_CORPUS); nothing to do")
        return 0
    files = sorted((root / "qa" / "dureader_zh").glob("*.json"))
    if not files:
        print(f"no DuReader questions under {root} (set EQS_CORPUS or pass a path); nothing to do")
        return 0
    ours = top2 = base = ceiling = entity_questions = 0
    hit_scores: list[int] = []
    miss_scores: list[int] = []
    for path in files:
        question = json.loads(path.read_text(encoding="utf-8"))
        hit, by_entity = make_judge(question)
        entity_questions += by_entity
        chunks: list[Chunk] = []
        first_paragraph = ""
        for document in question["documents"]:
            paragraphs = [p for p in document["paragraphs"] if p.strip()]
            if not first_paragraph and paragraphs:
                first_paragraph = paragraphs[0]
            chunks += chunk_text("\n".join(paragraphs))
        scored = score_chunks(chunks, question["question"])
        best = scored[0] if scored else None
        won = best is not None and hit(best.chunk.text)
        ours += won
        top2 += any(hit(item.chunk.text) for item in scored[:2])
        base += hit(first_paragraph)
        ceiling += any(hit(chunk.text) for chunk in chunks)
        if best is not None:
            (hit_scores if won else miss_scores).append(best.score)
    n = len(files)
    print(f"questions: {n} ({entity_questions} judged by entity answers, the rest by bigrams)")
    print(f"best snippet (ours) hit rate:            {ours}/{n} = {ours / n:.0%}")
    print(f"top-2 snippets (ours) hit rate:          {top2}/{n} = {top2 / n:.0%}")
    print(f"baseline first paragraph hit rate:       {base}/{n} = {base / n:.0%}")
    print(f"ceiling (some chunk hits):               {ceiling}/{n} = {ceiling / n:.0%}")
    for label, values in (("hits", hit_scores), ("misses", miss_scores)):
        if values:
            print(
                f"best score of {label}: min {min(values)}, "
                f"median {statistics.median(values):.0f}, max {max(values)} (MIN_SCORE {MIN_SCORE})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
