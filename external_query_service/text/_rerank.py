"""The second scoring pass: snippets chosen page by page, ranked over the whole question.

Each page's snippets were scored against that page's own chunks, so a word common on one page
and rare elsewhere weighs differently from page to page and the scores do not compare across
pages. ``rerank`` describes every snippet again with one ``TermStats`` — the sum of the term
statistics of every chunk of every page gathered for the question — and ranks them with the
fitted ranker (``ranker``): its calibrated probability that the snippet holds the answer is the
snippet's score (basis points), scaled by the share of the plan's targets the snippet names
(``(6 + 4 × share) / 10``, the target weight of ``score``) when there are targets. Nothing is
dropped here; ``answered`` says whether the question is answered: when the snippet ranked
first, the one quoted first, answers it. That snippet alone is judged (``Reranked.reaches``;
the others' is False): the decision reads no other, and the judgment is most of the pass's
cost. With ``semantic``, the judgment is the semantic one (``_answerability``'s docstring):
the first snippet's similarity to its query is computed by the embedding model, and the
ranker's order is unchanged.

A target may go by several names (an exchange-rate plan's currencies: ``USD``, 美元, US$):
with ``spellings``, a passage that names a target only by another of its names is judged
against the question written with that name (「美元兑人民币汇率」 read as 「USD兑人民币汇率」
for a rate page that writes ``USD/CNY``): the judgment reads words, and a code is not the
question's word for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ._answerability import AnswerabilityModel, answerability_features, load_answerability
from ._chunk import Chunk
from ._echo import fold
from ._parts import COVERED_SHARE
from ._ranker import RankerModel, RankerPassage, load_model
from ._ranker import features as ranker_features
from ._score import QUERY_WEIGHT, TARGET_WEIGHT, TermStats, copies, score_chunks, text_terms
from ._semantic import similarities
from ._tokens import query_terms

__all__ = ["Candidate", "Reranked", "Similarity", "answered", "rerank"]

#: The similarity of each of some passages' texts to a question, each 0..1
#: (``_semantic.similarities``, or a benchmark's cache of the same embeddings).
Similarity = Callable[[str, Sequence[str]], list[float]]


@dataclass(frozen=True)
class Candidate:
    """A snippet's text, the query it was gathered for and where it comes from: its page's
    title, the page's rank among the hits (0 first) and the snippet's offset on the page."""

    text: str
    query: str
    title: str = ""
    page: int = 0
    offset: int = 0


@dataclass(frozen=True)
class Reranked:
    """``passages[index]`` scores ``score`` basis points in the second pass; ``reaches`` when
    it is the passage judged (the one ranked first) and the answerability judgment says it
    answers (its probability reaches the judgment's ``threshold``), or, unjudged, when the
    ranker's probability reaches the ranker's threshold."""

    index: int
    score: int
    reaches: bool = True


def rerank(
    passages: Sequence[Candidate],
    stats: TermStats,
    targets: Sequence[str] = (),
    *,
    parts: Sequence[str] = (),
    spellings: Mapping[str, Sequence[str]] | None = None,
    judged: bool = True,
    model: RankerModel | None = None,
    judge: AnswerabilityModel | None = None,
    semantic: bool = False,
    similarity: Similarity = similarities,
) -> list[Reranked]:
    """Every passage once, best first (by score, then by the ranker's fitted score); equal
    scores keep the input order (deterministic), and a passage that copies one ranked above
    it (``_score.copies``: a copy of a page) comes after every passage that copies none.
    ``model`` and ``judge`` default to the packaged ranker and answerability judgment (the
    semantic one when ``semantic``: the first passage is read by ``similarity`` once, about
    0.4 s of CPU with the embedding model; ``SemanticUnavailable`` without the
    ``[semantic]`` extra). Only the first passage is judged; the others' ``reaches`` is
    False.

    ``parts`` are the things a question asks about one by one (a comparison's targets): a
    passage that names some of them and not the others answers its part, so it is judged
    against the question without the parts it does not name. ``spellings`` are the
    targets' names (the module docstring). With ``judged`` false, a
    passage reaches when the ranker's own probability reaches the ranker's threshold (for
    questions whose answer is any report about their target, which the verifier judges)."""
    model = model or load_model()
    judgment = (judge or load_answerability(semantic)) if judged else None
    if judgment is not None and judgment.semantic != semantic:
        raise ValueError("the answerability judgment's features do not match `semantic`")
    ranked: dict[int, tuple[int, float]] = {}
    reaches: dict[int, bool] = {}
    groups: dict[str, tuple[list[int], list[RankerPassage], list[list[float]]]] = {}
    for index, passage in enumerate(passages):
        groups.setdefault(passage.query, ([], [], []))[0].append(index)
    for query, (indexes, described, rows) in groups.items():
        chosen = [passages[i] for i in indexes]
        described += [RankerPassage(c.text, c.title, c.page, c.offset) for c in chosen]
        rows += ranker_features(query, described, stats)
        shares = _target_shares(chosen, indexes, query, targets, stats)
        for i, row in zip(indexes, rows, strict=True):
            probability = model.probability(row)
            scale = (QUERY_WEIGHT + TARGET_WEIGHT * shares[i]) / (QUERY_WEIGHT + TARGET_WEIGHT)
            ranked[i] = (max(0, min(10000, round(10000 * probability * scale))), model.score(row))
            reaches[i] = not judged and probability >= model.threshold
    order = sorted(ranked, key=lambda i: (-ranked[i][0], -ranked[i][1], i))
    # A passage that copies one ranked above it (the same article on another site:
    # ``_score.copies``) goes after every passage that copies none: the first ones quoted
    # are then all different.
    copied = copies([passages[i].text for i in order])
    order = [i for k, i in enumerate(order) if copied[k] == k] + [
        i for k, i in enumerate(order) if copied[k] != k
    ]
    if judgment is not None and order:
        # Only the passage ranked first is judged: the decision (``answered``) reads no
        # other, and the judgment costs most of the pass (with ``semantic``, a model call).
        first = order[0]
        query = passages[first].query
        indexes, described, rows = groups[query]
        at = indexes.index(first)
        similar = similarity(query, [described[at].text]) if semantic else None
        reaches[first] = _answers(
            query, described, at, stats, rows, parts, spellings or {}, judgment, similar
        )
    return [Reranked(i, ranked[i][0], reaches[i]) for i in order]


def answered(ranked: Sequence[Reranked], *, judged: bool = True) -> bool:
    """Whether a question whose passages ``rerank`` ranked is answered. Judged: when its
    first passage, the one quoted first, answers it (the judgment is fitted on first
    passages: five related passages always have a best one that looks like an answer, and a
    later one that reaches behind a first that does not is quoted after a passage that does
    not answer). Not judged: when any passage reaches the ranker's threshold."""
    if judged:
        return bool(ranked) and ranked[0].reaches
    return any(item.reaches for item in ranked)


def _answers(
    query: str,
    passages: Sequence[RankerPassage],
    at: int,
    stats: TermStats,
    rows: Sequence[Sequence[float]],
    parts: Sequence[str],
    spellings: Mapping[str, Sequence[str]],
    judge: AnswerabilityModel,
    semantic: Sequence[float] | None,
) -> bool:
    """Whether ``passages[at]`` answers ``query`` (or, naming only some of ``parts``, its
    part), judged among the passages judged against the same question (the bigrams' rarity
    is theirs); ``semantic``, its similarity to ``query`` for the semantic judgment (to the
    whole question, as fitted, also for a passage judged against its part)."""
    named = _Parts(parts)
    asked = [_spelled(named.part_of(query, p.text), p.text, spellings) for p in passages]
    picked = [i for i, question in enumerate(asked) if question == asked[at]]
    (facts,) = answerability_features(
        asked[at],
        [passages[i] for i in picked],
        stats,
        [rows[i] for i in picked],
        semantic,
        judged=[picked.index(at)],
    )
    return judge.probability(facts) >= judge.threshold


def _spelled(question: str, text: str, spellings: Mapping[str, Sequence[str]]) -> str:
    """``question`` with each target it names written as ``text`` names it, when ``text``
    names it only by another of its ``spellings`` (the text's case folded)."""
    folded = fold(text)
    for names in spellings.values():
        asked = [m for name in names if (m := re.search(re.escape(name), question, re.I))]
        if not asked or any(fold(m.group()) in folded for m in asked):
            continue
        written = next((name for name in names if fold(name) in folded), None)
        if written is not None:
            question = question[: asked[0].start()] + written + question[asked[0].end() :]
    return question


class _Parts:
    """A question's parts, folded, with each part's own terms (those no other part has),
    read once for all the passages judged against them."""

    def __init__(self, parts: Sequence[str]) -> None:
        self.parts = tuple(parts) if len(parts) >= 2 else ()
        cut = [frozenset(query_terms(part)) for part in self.parts]
        self.folded = [fold(part) for part in self.parts]
        self.own = [
            cut[index].difference(*(terms for i, terms in enumerate(cut) if i != index))
            for index in range(len(cut))
        ]

    def part_of(self, query: str, text: str) -> str:
        """``query`` without the parts that ``text`` does not name, when it names some. A
        part is named when the text holds it, or holds its share of the part's own terms
        (``_parts.COVERED_SHARE``): a sentence of a question asked in sentences is never
        written out whole by the passage that answers it."""
        if not self.parts:
            return query
        cut = text_terms(text)
        folded, held = cut.folded, cut.present
        named = [
            part
            for part, whole, own in zip(self.parts, self.folded, self.own, strict=True)
            if whole in folded or (own and sum(t in held for t in own) >= COVERED_SHARE * len(own))
        ]
        if not named or len(named) == len(self.parts):
            return query
        return _without(query, [part for part in self.parts if part not in named], named)


#: The most characters between two parts that only join them (「和」, 「、」, " and ").
_JOINER = 5


def _without(query: str, dropped: Sequence[str], kept: Sequence[str]) -> str:
    """``query`` with each ``dropped`` part left out, and with it what joins it to a ``kept``
    part next to it (「比亚迪和特斯拉的销量」 without 特斯拉 is 「比亚迪 的销量」, not
    「比亚迪和 的销量」): a dangling conjunction is a term no passage answering the part holds."""
    spans = []
    for part in dropped:
        start = query.find(part)
        while start >= 0:
            end = start + len(part)
            before = max(
                (query.rfind(k, 0, start) + len(k) for k in kept if k in query[:start]), default=-1
            )
            after = min((query.find(k, end) for k in kept if k in query[end:]), default=-1)
            if before >= 0 and start - before <= _JOINER:
                start = before
            elif after >= 0 and after - end <= _JOINER:
                end = after
            spans.append((start, end))
            start = query.find(part, end)
    pieces, at = [], 0
    for start, end in sorted(spans):
        pieces.append(query[at : max(at, start)])
        at = max(at, end)
    pieces.append(query[at:])
    return " ".join(piece.strip() for piece in pieces if piece.strip())


def _target_shares(
    chosen: Sequence[Candidate],
    indexes: Sequence[int],
    query: str,
    targets: Sequence[str],
    stats: TermStats,
) -> dict[int, float]:
    """The share of ``targets`` each passage names (1 without targets)."""
    if not targets:
        return dict.fromkeys(indexes, 1.0)
    distinct = len(dict.fromkeys(targets))
    # The offset carries the input position back through the scorer.
    chunks = [Chunk(i, len(c.text), c.text) for i, c in zip(indexes, chosen, strict=True)]
    return {
        scored.chunk.offset: min(1.0, len(scored.target_hits) / distinct)
        for scored in score_chunks(chunks, query, targets, stats=stats)
    }
