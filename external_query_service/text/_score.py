"""Chunks → scored chunks: rarity-weighted coverage of the query plus coverage of the targets.

Scores are integer basis points (0..10000) so they can sit inside hashed records; the same
input always gives the same scores and order.

Terms come from ``tokens.terms`` (chunks) and ``tokens.query_terms`` (the query, cut to
``MAX_QUERY_CHARS`` first). Rarity is measured over a *collection* of chunks — the chunks
being scored, or the ``TermStats`` of a larger set passed in (every chunk of every page of a
question, for the second pass in ``rerank``):

- each query term ``t`` weighs ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` (BM25's
  IDF; ``N`` chunks, ``df`` of them holding ``t``), so a term found in few chunks outweighs
  one found in most of them;
- a chunk earns a term's weight by mentioning it at least once. Repeats and chunk length do
  not count (BM25 with ``b = 0`` and its term-frequency credit capped at one mention): a
  passage that names the question's rare terms once beats a title that repeats its common
  ones, and a readable passage is not penalised for being longer than a fragment;
- ``coverage = Σ idf(t) over mentioned terms / Σ idf(t)`` over the query terms the collection
  holds, and ``points = 10000 × coverage × found``, where ``found`` is the share of the
  query's terms the collection holds at all (a page that never uses a query word cannot fully
  answer it);
- the same points counting only the terms mentioned *outside* the spans that ask the question
  (``echo.answer_terms``: question sentences, clauses with an interrogative word, a word-for-word
  copy of a question of ``MIN_COPIED_TERMS`` terms or more; and breadcrumb trails), at least as
  often as inside them, are the answering points, and
  ``query_score = ((10 - ANSWER_WEIGHT) × points + ANSWER_WEIGHT × answering points) // 10``.
  An introduction that asks "X 的大结局是什么？" covers the question as fully as the passage that
  tells the ending; this part puts the one that tells first, while a passage that answers
  without repeating the question's words (a heading asks, the text below answers) keeps most
  of its score.

The weighting is a few lines here rather than a BM25 library (bm25s): a sparse-matrix index
pays off for a large corpus queried many times, while each question scores a few hundred
chunks once, and it would bring numpy and scipy into every import.

A target is *hit* when one of its forms (``targets.target_forms``: the name, and the name
without an administrative-division word such as 市 or County) is fuzzily contained in the
chunk: rapidfuzz ``partial_ratio ≥ 90`` (for a two-character name that means an exact
match). ``score = query_score`` without targets; with targets
``score = (6 × query_score + 4 × target_coverage) // 10`` where
``target_coverage = 10000 × hits // distinct targets``. Equal scores keep the earlier chunk
first (and, in ``rerank``, the earlier page: the search engine's order).
"""

from __future__ import annotations

import math
import sys
import threading
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import chain
from typing import Final

from rapidfuzz import fuzz

from ._chunk import Chunk
from ._echo import answer_terms, fold, fold_all
from ._targets import target_forms
from ._tokens import query_terms, simplified, term_counts, term_counts_all

__all__ = [
    "ANSWER_WEIGHT",
    "COPY_OVERLAP",
    "MAX_QUERY_CHARS",
    "MIN_COPIED_TERMS",
    "MIN_SCORE",
    "QUERY_WEIGHT",
    "TARGET_HIT_RATIO",
    "TARGET_WEIGHT",
    "TERMS_KEPT_BYTES",
    "ScoredChunk",
    "TermStats",
    "TextTerms",
    "best_snippets",
    "copies",
    "coverage_points",
    "kept_terms_bytes",
    "pages_stats",
    "remember_terms",
    "score_chunks",
    "score_with_stats",
    "term_stats",
    "text_terms",
]

MAX_QUERY_CHARS: Final = 64
TARGET_HIT_RATIO: Final = 90
QUERY_WEIGHT: Final = 6
TARGET_WEIGHT: Final = 4
#: Default floor for ``best_snippets``: a chunk must cover about half of the query's
#: rarity-weighted terms (see bench/snippet_quality.py for where relevant and unrelated
#: chunks fall).
MIN_SCORE: Final = 5000
#: Tenths of ``query_score`` earned by the coverage outside the spans that ask the question
#: (``echo.answer_terms``); the rest is the coverage of the whole chunk.
ANSWER_WEIGHT: Final = 3
#: A copy of the query counts as restating it only when the query has this many distinct
#: terms: a passage that answers a keyword or two writes them out.
MIN_COPIED_TERMS: Final = 3


#: Bytes of chunk cuts (``TextTerms``, with their texts, as Python holds them) this process
#: keeps, most recently used: the second pass (``rerank``) and every copy of a question asked
#: at once score the very snippets the page analysis cut already. A cut of a 360-character
#: Chinese chunk holds about 16 KB, so this is some 250 cuts: the snippets (two a page) of
#: 15 questions of 8 pages at once; a cut made again costs well under a millisecond. Bounded
#: in bytes, not in cuts: 2,048 cuts held 32 MB in the service and in every analysis worker.
TERMS_KEPT_BYTES: Final = 4 * 1024 * 1024


@dataclass(frozen=True)
class TextTerms:
    """A chunk's text cut once for every reader of it: its index terms with their counts
    (BM25 counts repeats) and the text folded as the terms were (``echo.fold``: the echo
    spans and the ranker's proximity are found in it). Treat the counts as read-only."""

    counts: Mapping[str, int]
    folded: str

    @property
    def present(self) -> AbstractSet[str]:
        """The distinct terms (the coverage scores count presence only): the counts' keys, a
        view rather than a set of their own, which cost a fifth of the cut to build."""
        return self.counts.keys()


# The kept cuts, least recently used first. A plain ordered map under a lock: this module is
# pure text work, so it keeps its own few lines of LRU instead of the package's memo
# (``_memo.py``).
_TERMS: OrderedDict[str, tuple[TextTerms, int]] = OrderedDict()  # text -> (cut, its bytes)
_TERMS_LOCK = threading.Lock()
_terms_bytes = 0  # the bytes of the kept cuts, added up


def _cut_bytes(text: str, cut: TextTerms) -> int:
    """What keeping ``cut`` of ``text`` holds: the text, the cut's map and folded text, each
    term once (the counts are small ints, which Python shares), and the map's entry."""
    size = sys.getsizeof
    held = size(text) + size(cut) + size(cut.counts) + size(cut.folded)
    return held + sum(map(size, cut.counts)) + 100


def kept_terms_bytes() -> int:
    """The bytes the kept cuts hold now (at most ``TERMS_KEPT_BYTES``)."""
    return _terms_bytes


def text_terms(text: str) -> TextTerms:
    """The cut of ``text``: kept from an earlier call (or ``remember_terms``), else made now."""
    found = _kept_cut(text)
    return found if found is not None else _keep(text, _new_cut(text))


def _kept_cut(text: str) -> TextTerms | None:
    with _TERMS_LOCK:
        found = _TERMS.get(text)
        if found is not None:
            _TERMS.move_to_end(text)
            return found[0]
    return None


def _cut(text: str) -> TextTerms:
    """``text_terms`` without keeping a cut it makes."""
    found = _kept_cut(text)
    return found if found is not None else _new_cut(text)


def _new_cut(text: str) -> TextTerms:
    folded = fold(text)
    counts = term_counts(text, folded)
    return TextTerms(counts, folded)


def _cuts(texts: Sequence[str], *, keep: bool) -> list[TextTerms]:
    """``[text_terms(t) for t in texts]`` (``keep``) or ``[_cut(t) …]``, the texts no cut is
    kept of cut together (``_new_cuts``)."""
    found = [_kept_cut(text) for text in texts]
    made = iter(_new_cuts([text for text, cut in zip(texts, found, strict=True) if cut is None]))
    cuts = [cut if cut is not None else next(made) for cut in found]
    if keep:
        for text, earlier, cut in zip(texts, found, cuts, strict=True):
            if earlier is None:
                _keep(text, cut)
    return cuts


def _new_cuts(texts: Sequence[str]) -> list[TextTerms]:
    """``[_new_cut(t) for t in texts]``, folded and tested as one text (``echo.fold_all``,
    ``tokens.term_counts_all``): a page's chunks, a fifth less CPU than one by one."""
    if not texts:
        return []
    folds = fold_all(texts)
    return [
        TextTerms(counts, folded)
        for counts, folded in zip(term_counts_all(texts, folds), folds, strict=True)
    ]


def remember_terms(text: str, counts: Mapping[str, int], folded: str) -> TextTerms:
    """Keep the cut of ``text`` made elsewhere (an analysis worker's, say) so that this process
    does not cut it again (least recently used out past ``TERMS_KEPT_BYTES``; a cut larger
    than that is not kept); the ``TextTerms`` kept."""
    return _keep(text, TextTerms(counts, folded))


def _keep(text: str, cut: TextTerms) -> TextTerms:
    global _terms_bytes
    held = _cut_bytes(text, cut)
    with _TERMS_LOCK:
        earlier = _TERMS.pop(text, None)
        if earlier is not None:
            _terms_bytes -= earlier[1]
        if held <= TERMS_KEPT_BYTES:
            _TERMS[text] = (cut, held)
            _terms_bytes += held
        while _terms_bytes > TERMS_KEPT_BYTES:
            _terms_bytes -= _TERMS.popitem(last=False)[1][1]
    return cut


@dataclass(frozen=True)
class TermStats:
    """What a collection of chunks tells about its terms: how many chunks it holds, in how
    many of them each term occurs (``frequencies``: term → document frequency, only terms
    that occur) and the chunks' distinct terms counted and added up (``term_total``: BM25's
    average chunk length is ``term_total / chunks``).

    Those three are all that rarity and BM25 read, so a page keeps and sends them instead of
    the set of every chunk's terms: one entry per distinct term of the page rather than one
    per term of every chunk, and ``df`` is a lookup rather than a scan of every set. ``a + b``
    is the collection of both; it merges no maps (``_Summed``): a question sums the stats of
    some eight pages and then reads the frequencies of its query's few terms only. Treat
    ``frequencies`` as read-only.
    """

    chunks: int = 0
    frequencies: Mapping[str, int] = field(default_factory=dict)
    term_total: int = 0

    def df(self, term: str) -> int:
        """In how many chunks ``term`` occurs."""
        return self.frequencies.get(term, 0)

    def __add__(self, other: TermStats) -> TermStats:
        if not other.chunks:
            return self
        if not self.chunks:
            return other
        return TermStats(
            self.chunks + other.chunks,
            _Summed.of(self.frequencies, other.frequencies),
            self.term_total + other.term_total,
        )


class _Summed(Mapping[str, int]):
    """The frequencies of several collections, added up when a term is read. Merging the
    maps of a question's pages into one would touch every distinct term of every page (a few
    hundred each) to answer a few dozen lookups; each lookup here reads one map per page
    instead. Iterating (equality, a record) merges them then."""

    __slots__ = ("_parts",)

    def __init__(self, parts: tuple[Mapping[str, int], ...]) -> None:
        self._parts = parts

    @classmethod
    def of(cls, *maps: Mapping[str, int]) -> _Summed:
        """The sum of ``maps``, each summed view among them opened into its own parts (so a
        long ``sum`` stays one level deep)."""
        parts: list[Mapping[str, int]] = []
        for item in maps:
            parts += item._parts if isinstance(item, _Summed) else (item,)
        return cls(tuple(parts))

    def __getitem__(self, term: str) -> int:
        found = sum([part.get(term, 0) for part in self._parts])
        if not found:
            raise KeyError(term)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self.merged())

    def __len__(self) -> int:
        return len(self.merged())

    def merged(self) -> dict[str, int]:
        """The parts added up into one map."""
        out: dict[str, int] = {}
        for part in self._parts:
            for term, n in part.items():
                out[term] = out.get(term, 0) + n
        return out


#: Two texts whose distinct terms overlap this much (Jaccard) are one text given twice: the
#: same article syndicated or mirrored, a byline or a line of the site's furniture apart.
COPY_OVERLAP: Final = 0.8


def copies(texts: Sequence[str]) -> list[int]:
    """For each of ``texts``, the index of the first text it copies, its own when it copies
    none: two texts are copies when their distinct terms overlap by ``COPY_OVERLAP`` or more
    (Jaccard), each text compared with the first of every group before it."""
    firsts: list[tuple[int, AbstractSet[str]]] = []
    out: list[int] = []
    for index, text in enumerate(texts):
        terms = text_terms(text).present
        copied = next((i for i, seen in firsts if _overlap(terms, seen) >= COPY_OVERLAP), None)
        if copied is None:
            firsts.append((index, terms))
        out.append(index if copied is None else copied)
    return out


def _overlap(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def pages_stats(pages: Iterable[tuple[TermStats, Collection[str]]]) -> TermStats:
    """The term statistics of a question's pages, given as each page's ``TermStats`` and the
    snippets it kept: every page's added once, except a copy of an earlier page (one whose
    snippets, some at least, each copy a snippet an earlier page kept, by ``copies``: the
    same article syndicated or mirrored on another site). Counted again, a copy would make
    every word it repeats look as common as the question's topic, and the passages that state
    the answer would weigh it less the more pages agree on it."""
    listed = [(stats, list(snippets)) for stats, snippets in pages]
    owner = [page for page, (_, snippets) in enumerate(listed) for _ in snippets]
    first = copies([snippet for _, snippets in listed for snippet in snippets])
    total = TermStats()
    at = 0
    for page, (stats, snippets) in enumerate(listed):
        mine = range(at, at + len(snippets))
        at += len(snippets)
        if snippets and all(owner[first[i]] < page for i in mine):
            continue
        total += stats
    return total


def term_stats(term_lists: Iterable[Collection[str]]) -> TermStats:
    """The ``TermStats`` of chunks given as their terms (lists or sets; a term a list repeats
    counts once)."""
    return _stats_of([t if isinstance(t, set | frozenset) else set(t) for t in term_lists])


def _stats_of(chunk_terms: Sequence[AbstractSet[str]]) -> TermStats:
    """The ``TermStats`` of chunks given as their distinct terms (counted in C: a page's
    chunks hold thousands of terms)."""
    frequencies = dict(Counter(chain.from_iterable(chunk_terms)))
    return TermStats(len(chunk_terms), frequencies, sum(map(len, chunk_terms)))


@dataclass(frozen=True)
class ScoredChunk:
    """A chunk with its combined ``score``, its ``query_score`` (both basis points) and the
    targets (as given) that it contains."""

    chunk: Chunk
    score: int
    query_score: int
    target_hits: tuple[str, ...]


def _fold(text: str) -> str:
    # As ``targets.normalize_for_match`` folds the targets' forms: whitespace removed too.
    return "".join(simplified(unicodedata.normalize("NFKC", text).casefold()).split())


def _contains(target: str, chunk: str) -> bool:
    if target in chunk:
        return True
    if len(chunk) < len(target):
        return False
    return fuzz.partial_ratio(target, chunk, score_cutoff=TARGET_HIT_RATIO) > 0


class _Query:
    """A query's terms with their weights over one ``TermStats``, computed once per call."""

    def __init__(self, query: str, stats: TermStats) -> None:
        self.wanted = Counter(query_terms(query[:MAX_QUERY_CHARS]))
        # The question as a page would copy it, when it is one: the passages that answer a
        # keyword or two write them out.
        asks = len(self.wanted) >= MIN_COPIED_TERMS
        self.question = fold(query[:MAX_QUERY_CHARS]) if asks else ""
        self.total = sum(self.wanted.values())
        self.chunks = max(stats.chunks, 1)
        # Terms the collection holds, with their weight (idf × times asked); the others.
        frequencies = {term: stats.df(term) for term in self.wanted}
        self.weights = {
            term: self._idf(frequencies[term], times)
            for term, times in self.wanted.items()
            if frequencies[term]
        }
        self.unseen = {t: n for t, n in self.wanted.items() if t not in self.weights}
        self.held = sum(self.wanted[term] for term in self.weights)
        self.weight = sum(self.weights.values())
        self.weighed = tuple(self.weights.items())  # summed in this order, as ``weight`` is

    def _idf(self, df: int, times: int) -> float:
        return times * math.log(1 + (self.chunks - df + 0.5) / (df + 0.5))

    def points(self, present: AbstractSet[str]) -> int:
        if not self.total or not present:
            return 0
        # A list, not a generator: the same sum in the same order, a third faster (every chunk
        # of every page is scored twice over).
        credit = sum([weight for term, weight in self.weighed if term in present])
        weight, held = self.weight, self.held
        # A chunk scored against borrowed stats may hold a term they never counted.
        for term, times in self.unseen.items():
            if term in present:
                extra = self._idf(1, times)
                credit, weight, held = credit + extra, weight + extra, held + times
        if not weight:
            return 0
        return max(0, min(10000, round(10000 * credit / weight * held / self.total)))

    def answer_points(self, cut: TextTerms) -> int:
        """``points`` blended with the points of the terms mentioned outside the question
        spans of the text ``cut`` is of (``ANSWER_WEIGHT`` tenths)."""
        present = cut.present
        whole = self.points(present)
        if not whole:
            return 0
        told = answer_terms(cut.folded, self.question, self.wanted, folded=True)
        answered = self.points(told & present)
        return (whole * (10 - ANSWER_WEIGHT) + answered * ANSWER_WEIGHT) // 10


def coverage_points(query: str, texts: Sequence[str], stats: TermStats) -> list[tuple[int, int]]:
    """For each text, its rarity-weighted coverage of ``query`` over ``stats`` and the same
    coverage counting only the terms it tells outside its question spans (both basis points;
    the two parts of ``query_score``, module docstring): features for ``ranker``."""
    wanted = _Query(query, stats)
    out: list[tuple[int, int]] = []
    for text in texts:
        cut = text_terms(text)
        told = answer_terms(cut.folded, wanted.question, wanted.wanted, folded=True)
        out.append((wanted.points(cut.present), wanted.points(told & cut.present)))
    return out


def score_chunks(
    chunks: Sequence[Chunk],
    query: str,
    targets: Sequence[str] = (),
    *,
    stats: TermStats | None = None,
) -> list[ScoredChunk]:
    """Score every chunk; sorted by score (highest first), then by offset.

    Rarity comes from ``stats`` when given, else from ``chunks`` themselves.
    """
    return score_with_stats(chunks, query, targets, stats=stats)[0]


def score_with_stats(
    chunks: Sequence[Chunk],
    query: str,
    targets: Sequence[str] = (),
    *,
    stats: TermStats | None = None,
    keep: int | None = None,
) -> tuple[list[ScoredChunk], TermStats]:
    """``score_chunks`` and the ``TermStats`` of ``chunks`` (cut once for both), so a later
    pass can weigh rarity over several pages without cutting their text again.

    The chunks' cuts are kept for later readers (``text_terms``); with ``keep``, only those of
    the ``keep`` best-scored chunks (the snippets a page keeps, which the second pass and the
    page's record read again): keeping every chunk of every page only pushed those out, and
    sizing each kept cut was a sixth of cutting it."""
    # The forms of each target (``target_forms``, cut to MAX_QUERY_CHARS) → the target as
    # given; the first of two targets with the same forms wins.
    folded_targets: dict[tuple[str, ...], str] = {}
    for target in targets:
        forms = tuple(form[:MAX_QUERY_CHARS] for form in target_forms(target))
        if forms and forms not in folded_targets:
            folded_targets[forms] = target
    cuts = _cuts([chunk.text for chunk in chunks], keep=keep is None)
    own = _stats_of([cut.present for cut in cuts])  # presence is all that counts
    wanted = _Query(query, stats or own)
    scored: list[ScoredChunk] = []
    for chunk, cut in zip(chunks, cuts, strict=True):
        query_score = wanted.answer_points(cut)
        if folded_targets:
            folded_chunk = _fold(chunk.text)
            hits = tuple(
                given
                for forms, given in folded_targets.items()
                if any(_contains(form, folded_chunk) for form in forms)
            )
            coverage = 10000 * len(hits) // len(folded_targets)
            score = (QUERY_WEIGHT * query_score + TARGET_WEIGHT * coverage) // (
                QUERY_WEIGHT + TARGET_WEIGHT
            )
        else:
            hits, score = (), query_score
        scored.append(ScoredChunk(chunk, score, query_score, hits))
    order = sorted(range(len(scored)), key=lambda i: (-scored[i].score, scored[i].chunk.offset))
    if keep is not None:
        for i in order[: max(keep, 0)]:
            _keep(chunks[i].text, cuts[i])
    return [scored[i] for i in order], own


def best_snippets(
    chunks: Sequence[Chunk],
    query: str,
    targets: Sequence[str] = (),
    *,
    limit: int = 2,
    min_score: int = MIN_SCORE,
    stats: TermStats | None = None,
) -> list[ScoredChunk]:
    """The ``limit`` best chunks scoring at least ``min_score``, best first (maybe none)."""
    if limit < 1:
        return []
    scored = score_chunks(chunks, query, targets, stats=stats)
    return [item for item in scored if item.score >= min_score][:limit]
