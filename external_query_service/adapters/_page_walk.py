"""The page walk's rules: when the next page starts, when enough are read, how long pages still
loading may take, which pages are cut off, and what a page left unfinished counts as.

``PageWalk`` holds one walk's state by hit index and decides; the driver (``pages._walk``)
runs the fetches and analyses, tells the walk what happened (``started``, ``arrived``,
``finished``) and does what the rules say. Nothing here awaits, reads a clock or touches the
network: every time is passed in, so each rule is a plain function of the walk's state.

Which pages are cut off must come out the same when a recorded world is replayed, however
busy the host is. Two rules see to that:

- **Analysis is cut off by markup size, never by time.** A page whose markup is over
  ``ANALYSIS_MARKUP_BUDGET`` (``markup_units``: tags plus attributes, counted in the body's
  bytes) is *heavy*: its analysis waits until the walk cannot answer without it, and once a
  page has been read and nothing else is in flight it is cut off (``cut_off:analysis``)
  without ever reaching a worker. Every other page whose body has arrived is analysed and
  waited for, within the question's deadline. Whether a page is heavy depends only on its
  bytes, which a replay serves unchanged, so a replay cuts off the same pages; a rule by
  analysis time (a page still analysing when the answer could be formed) cut off different
  pages on every run of a busy host.
- **The grace for pages still loading is relative, and bounded by the walk.** Once the walk
  has what it can get, a page still loading gets ``STRAGGLER_GRACE_S`` plus half the time
  the slowest page read took. A busy host slows every page of a walk alike, so a page that
  came in beside the others in the recording still does in the replay (a fixed quarter
  second cut off a page one redirect further away whenever the host was loaded); and
  since the slowest page read took no longer than the walk so far, a dripping page never
  makes the walk longer than 1.5 times what it took without it, plus a quarter second.
  (Twice the slowest page, the rule before, let one drip hold an answer 2.6 times as long.)

Those two rules narrow what the host's speed decides; they cannot remove it (a page can
outlast any grace on a loaded host). So a recording also keeps how each of its walks ended
(``WalkRecord``: the hits it was given and the fate of each hit it reached), and a replay of
that world walks by the record instead of the clock (``RecordedWalks``): it reaches the same
hits, waits for every page the recording read whatever the clock says, and cuts off the pages
the recording cut off, with the same reason (``_pages._replayed_walk``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

__all__ = [
    "ANALYSIS_MARKUP_BUDGET",
    "CUT_OFF",
    "CUT_OFF_ANALYSIS",
    "STRAGGLER_FLOOR_S",
    "STRAGGLER_GRACE_S",
    "WALK_READ",
    "HeldPages",
    "PageWalk",
    "RecordedWalks",
    "WalkObserver",
    "WalkRecord",
    "markup_units",
    "straggler_grace",
    "straggler_patience",
]

#: Once the walk has what it can get short of ``max_pages`` (some pages read and nothing left
#: to start), the least time pages still loading may take before they are cut off; also the
#: longest a page may still load after another was read before it loses its place. (With
#: ``max_pages`` pages read nothing more is waited for.) A quarter second is long enough for
#: a page whose last bytes are already on the way, short enough that one dripping or silent
#: page adds no noticeable latency to the answer.
STRAGGLER_GRACE_S = 0.25
#: The least a page still loading after another was read keeps its place, however quick the
#: read pages were: on a busy host a fast page can be held up by scheduling for tens of
#: milliseconds, and which pages a walk reads must not hang on that (a replayed fixture world
#: answers every time with the same pages).
STRAGGLER_FLOOR_S = 0.1
#: The share of the slowest read page's time the pages still loading get on top of
#: ``STRAGGLER_GRACE_S`` once the walk has what it can get. A page one redirect away makes
#: two exchanges where the page read made one, but the read page's time includes its
#: analysis too; more than a half would let a drip hold the answer past 1.5 times the walk.
_GRACE_SHARE = 0.5

#: Markup units (``markup_units``) past which a page's analysis is deferred, and cut off once
#: another page was read. The 249 pages of the extraction corpus (news, blogs, encyclopaedia
#: articles, in eight languages) reach at most 23,904 (median analysis 48 ms of CPU); a
#: 6,000-paragraph report of 1.3 MB has about 12,000. Pages over twice the largest are what
#: the budget is for: a 25,000-row table (250,000 units) took 11.6 s of CPU to analyse, a
#: tag with 60,000 attributes 99 s, 30,000 links 5.7 s.
ANALYSIS_MARKUP_BUDGET = 50_000

#: The failure of a page cut off while still loading.
CUT_OFF = "cut_off"
#: The failure of a page cut off after its body arrived: its analysis was still pending or
#: running when the walk ended.
CUT_OFF_ANALYSIS = "cut_off:analysis"

#: The fate of a hit whose page was read (``WalkRecord.fates``); any other fate is the page's
#: failure (``cut_off``, ``error_status:404`` ...).
WALK_READ = "read"

#: Media types whose markup the budget counts; other bodies (plain text, PDF, whose pages
#: ``max_pdf_pages`` bounds) have none.
_MARKUP_TYPES = ("text/html", "application/xhtml+xml", "text/xml", "application/xml")


def markup_units(body: bytes, content_type: str) -> int:
    """How much markup ``body`` carries: its ``<`` and ``=`` bytes (tags, attributes), for an
    HTML or XML page; 0 for any other type. A count over bytes, in C: it costs about a
    millisecond per megabyte, and the same body always gives the same count (a ``<`` or
    ``=`` in a script or in text counts too, which only ever makes a page look heavier)."""
    if content_type not in _MARKUP_TYPES:
        return 0
    return body.count(b"<") + body.count(b"=")


def straggler_patience(slowest_s: float) -> float:
    """How long a page still loading keeps its place after another page was read, when the
    slowest page read so far took ``slowest_s``: as long again, at least
    ``STRAGGLER_FLOOR_S`` and at most ``STRAGGLER_GRACE_S``."""
    return min(STRAGGLER_GRACE_S, max(STRAGGLER_FLOOR_S, slowest_s))


def straggler_grace(slowest_s: float) -> float:
    """How much longer pages still loading may take once the walk has what it can get, when
    the slowest page read took ``slowest_s``: ``STRAGGLER_GRACE_S`` plus half ``slowest_s``
    (module docstring)."""
    return STRAGGLER_GRACE_S + _GRACE_SHARE * slowest_s


class HeldPages(Enum):
    """What becomes of the heavy pages held back once nothing else is in flight."""

    #: Nothing to decide: none is held, or something else is still in flight.
    WAIT = "wait"
    #: A page was read: the answer can be formed without them, so they are cut off.
    CUT_OFF = "cut_off"
    #: No page was read: the answer needs them, so they are analysed after all.
    ANALYSE = "analyse"


@dataclass
class PageWalk:
    """One walk's state (hits by their index in the list) and its rules.

    A page is *loading* from ``started`` until ``arrived`` (its body is in hand) or
    ``finished`` (its fetch failed); an arrived page is *analysing*, or *held* when it is
    heavy; ``finished`` ends it, read or not. ``fetch_by`` is when no page may start any
    more and fetches end (the question's deadline less the adapter's margin), ``stop_at``
    when the walk hands back what it has whatever is still running; both None without a
    deadline.
    """

    wanted: int
    budget: int
    fetch_by: float | None = None
    stop_at: float | None = None
    started_count: int = 0
    read: int = 0
    #: No hit is left to start: the list ran out or the fetch budget is spent.
    exhausted: bool = False
    #: When the pages still loading are cut off (set once the walk has what it can get).
    cut_by: float | None = None
    #: ``cut_by`` has passed and the pages then loading were cut off.
    patience_over: bool = False
    #: When the pages loading now lose their place to the next hit.
    demote_at: float | None = None
    #: The longest a read page took, fetch and analysis.
    slowest: float = 0.0
    #: When the last page was read (None: none yet).
    last_read: float | None = None
    loading: dict[int, float] = field(default_factory=dict)  # index → when its fetch began
    #: Pages still loading that lost their place: the next hit started beside them.
    stragglers: set[int] = field(default_factory=set)
    analysing: dict[int, float] = field(default_factory=dict)  # index → when its fetch began
    held: dict[int, float] = field(default_factory=dict)  # heavy pages, not yet analysed

    # -- when to start the next page ------------------------------------------------------
    def may_start(self, now: float) -> bool:
        """Whether the next hit may start: a place is free (pages read, loading in their
        place and analysing count; stragglers and held pages do not), the fetch budget is
        not spent (else the walk is ``exhausted``), and it is not too late to read a page."""
        if self.read + len(self.loading) - len(self.stragglers) + len(self.analysing) >= (
            self.wanted
        ):
            return False
        if self.started_count >= self.budget:
            self.exhausted = True
            return False
        return self.fetch_by is None or now < self.fetch_by

    def ran_out(self) -> None:
        """The list has no hit left to start."""
        self.exhausted = True

    def started(self, index: int, now: float) -> None:
        """Hit ``index``'s fetch began at ``now``."""
        self.started_count += 1
        self.loading[index] = now

    # -- what happened ----------------------------------------------------------------------
    def arrived(self, index: int, markup: int) -> bool:
        """Hit ``index``'s body is in hand, with ``markup`` markup units: True when it is to
        be analysed now, False when it is heavy and held back (it then holds no place)."""
        began = self.loading.pop(index)
        self.stragglers.discard(index)
        if markup > ANALYSIS_MARKUP_BUDGET:
            self.held[index] = began
            return False
        self.analysing[index] = began
        return True

    def release(self) -> list[int]:
        """The held pages, in list order, to be analysed now (``HeldPages.ANALYSE``)."""
        released = sorted(self.held)
        for index in released:
            self.analysing[index] = self.held.pop(index)
        return released

    def finished(self, index: int, *, read: bool, now: float) -> None:
        """Hit ``index`` is done at ``now``: ``read`` when its page was read. A read page
        that took this long leaves a page still loading as long again after it no excuse:
        from ``demote_at`` its place goes to the next hit."""
        began = self.loading.pop(index, None)
        if began is None:
            began = self.analysing.pop(index)
        self.stragglers.discard(index)
        if read:
            self.read += 1
            self.last_read = now
            self.slowest = max(self.slowest, now - began)
            self.demote_at = now + straggler_patience(self.slowest)

    # -- when enough is read, the grace, the cut-offs -------------------------------------
    def enough(self) -> bool:
        """Every page the walk wants is read: pages still in flight would only add to it."""
        return self.read >= self.wanted

    def settle(self, now: float) -> None:
        """Once the walk has what it can get (a page read, nothing left to start), the pages
        still loading get ``straggler_grace`` of the slowest read page, and no more, counted
        from the last page read or the last start of a page still loading, whichever came
        later: a page that held its place until it lost it (the walk only learns then that
        nothing is left to start) has had that wait already, and a page started late still
        gets the whole grace."""
        if self.cut_by is None and self.read and self.exhausted:
            since = max([now if self.last_read is None else self.last_read, *self.loading.values()])
            self.cut_by = since + straggler_grace(self.slowest)

    def cut_loading(self, now: float) -> list[int]:
        """The pages still loading once ``cut_by`` has passed (once; pages whose body has
        arrived are not among them), which are cut off now."""
        if self.patience_over or self.cut_by is None or now < self.cut_by:
            return []
        self.patience_over = True
        cut = sorted(self.loading)
        self.loading.clear()
        self.stragglers.clear()
        return cut

    def demote(self, now: float) -> None:
        """From ``demote_at`` the pages still loading lose their place (the next hit starts
        beside them, within the fetch budget); pages whose body arrived are not loading."""
        if self.demote_at is not None and now >= self.demote_at:
            self.stragglers.update(self.loading)
            self.demote_at = None

    def held_pages(self) -> HeldPages:
        """What becomes of the held heavy pages: decided only once nothing is loading or
        analysing (so nothing else can still be read; a held page holds no place, so the
        walk has started every hit it could). Then a page read means the answer can be
        formed without them; none read means it needs them."""
        if not self.held or self.loading or self.analysing:
            return HeldPages.WAIT
        return HeldPages.CUT_OFF if self.read else HeldPages.ANALYSE

    def out_of_time(self, now: float) -> bool:
        """The walk must hand back what it has now."""
        return self.stop_at is not None and now >= self.stop_at

    def wake_at(self) -> float | None:
        """The next time a rule may act without any page finishing: the cut-off (until it
        has passed), the demotion, the stop; None when only a page's end can change
        anything."""
        ends = [
            end
            for end in (None if self.patience_over else self.cut_by, self.stop_at, self.demote_at)
            if end is not None
        ]
        return min(ends) if ends else None

    # -- what a page left unfinished counts as --------------------------------------------
    def dropped(self, index: int) -> str:
        """The failure of hit ``index`` when the walk ends before it did: ``cut_off:analysis``
        once its body had arrived (analysing or held), ``cut_off`` while it was loading."""
        return CUT_OFF_ANALYSIS if index in self.analysing or index in self.held else CUT_OFF


# -- how a walk ended, recorded and replayed -------------------------------------------------


@dataclass(frozen=True)
class WalkRecord:
    """How one walk ended: the adapter, the hits it was given (URLs, in order) and the fate
    of each hit it reached (``WALK_READ`` or the page's failure). The walk reaches hits in
    list order, so ``fates`` is for the first ``len(fates)`` hits; the others were not
    reached."""

    adapter_id: str
    hits: tuple[str, ...]
    fates: tuple[str, ...]


class WalkObserver(Protocol):
    """Told of every walk as it ends (a recording keeps them, for the replay)."""

    def __call__(self, record: WalkRecord) -> None: ...


class RecordedWalks:
    """The walks a recording made, for a replay to make again: the fates of a walk by the same
    adapter over the same hits (``take``). Two such walks in one recording are replayed in
    the order they were recorded (the last one again for any more)."""

    def __init__(self, records: Iterable[WalkRecord]) -> None:
        self._fates: dict[tuple[str, tuple[str, ...]], list[tuple[str, ...]]] = {}
        for record in records:
            self._fates.setdefault((record.adapter_id, record.hits), []).append(record.fates)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sum(len(fates) for fates in self._fates.values())

    def take(self, adapter_id: str, hits: Sequence[str]) -> tuple[str, ...] | None:
        """The recorded fates of ``adapter_id``'s walk over ``hits``; None when the recording
        made no such walk (the walk then follows its own rules)."""
        with self._lock:
            queue = self._fates.get((adapter_id, tuple(hits)))
            if not queue:
                return None
            return queue.pop(0) if len(queue) > 1 else queue[0]
