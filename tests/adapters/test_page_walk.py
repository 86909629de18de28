"""The page walk's rules one by one: a ``PageWalk`` told what happened, with times passed in
(no network, no event loop)."""

from __future__ import annotations

import pytest

from external_query_service.adapters._page_walk import (
    ANALYSIS_MARKUP_BUDGET,
    CUT_OFF,
    CUT_OFF_ANALYSIS,
    STRAGGLER_FLOOR_S,
    STRAGGLER_GRACE_S,
    HeldPages,
    PageWalk,
    RecordedWalks,
    WalkRecord,
    markup_units,
    straggler_grace,
    straggler_patience,
)

LIGHT = 100  # markup units of an ordinary page
HEAVY = ANALYSIS_MARKUP_BUDGET + 1


def walk_with(*indices: int, wanted: int = 2, budget: int = 4, at: float = 0.0) -> PageWalk:
    walk = PageWalk(wanted, budget)
    for index in indices:
        assert walk.may_start(at)
        walk.started(index, at)
    return walk


def read(walk: PageWalk, index: int, *, now: float, markup: int = LIGHT) -> None:
    """Page ``index`` arrives and its analysis reads it, at ``now``."""
    assert walk.arrived(index, markup)
    walk.finished(index, read=True, now=now)


# -- when to start the next page --------------------------------------------------------------


def test_a_page_starts_while_a_place_is_free_and_not_beyond() -> None:
    walk = walk_with(0, 1, wanted=2)
    assert not walk.may_start(0.0)  # both places taken by pages loading
    walk.finished(0, read=False, now=0.1)  # a failed page frees its place
    assert walk.may_start(0.1)


def test_the_fetch_budget_ends_the_starts_and_exhausts_the_walk() -> None:
    walk = walk_with(0, 1, wanted=2, budget=3)
    walk.finished(0, read=False, now=0.1)
    walk.finished(1, read=False, now=0.1)
    walk.started(2, 0.1)
    walk.finished(2, read=False, now=0.2)
    assert not walk.exhausted
    assert not walk.may_start(0.2)
    assert walk.exhausted


def test_no_page_starts_once_the_fetch_time_is_over() -> None:
    walk = PageWalk(2, 4, fetch_by=5.0)
    assert walk.may_start(4.9)
    assert not walk.may_start(5.0)
    assert not walk.exhausted  # too late is not the list running out


def test_a_page_read_and_one_analysing_hold_their_places() -> None:
    walk = walk_with(0, 1, wanted=2)
    read(walk, 0, now=0.1)
    assert walk.arrived(1, LIGHT)  # analysing now
    assert not walk.may_start(0.1)


def test_a_straggler_loses_its_place_after_the_patience_of_the_read_pages() -> None:
    walk = walk_with(0, 1, wanted=2)
    read(walk, 0, now=0.02)  # a quick page: the floor applies
    assert walk.demote_at == pytest.approx(0.02 + STRAGGLER_FLOOR_S)
    walk.demote(0.05)
    assert not walk.may_start(0.05)  # not yet
    walk.demote(0.02 + STRAGGLER_FLOOR_S)
    assert walk.stragglers == {1}
    assert walk.may_start(0.2)  # page 1 keeps loading, the next hit starts beside it
    assert walk.demote_at is None


def test_a_page_whose_body_arrived_is_never_demoted() -> None:
    walk = walk_with(0, 1, 2, wanted=3)
    read(walk, 0, now=0.02)
    assert walk.arrived(1, LIGHT)
    walk.demote(1.0)
    assert walk.stragglers == {2}


def test_a_heavy_page_holds_no_place() -> None:
    walk = walk_with(0, 1, wanted=2)
    assert not walk.arrived(0, HEAVY)
    assert walk.held.keys() == {0}
    assert walk.may_start(0.1)


# -- when enough pages are read -----------------------------------------------------------


def test_enough_is_max_pages_read_and_failures_do_not_count() -> None:
    walk = walk_with(0, 1, wanted=2)
    read(walk, 0, now=0.1)
    walk.finished(1, read=False, now=0.1)
    assert not walk.enough()
    walk.started(2, 0.1)
    read(walk, 2, now=0.2)
    assert walk.enough()


# -- the grace ----------------------------------------------------------------------------


def test_the_grace_begins_only_once_a_page_was_read_and_nothing_is_left_to_start() -> None:
    walk = walk_with(0, 1, wanted=3)
    walk.settle(0.1)
    assert walk.cut_by is None  # nothing read yet
    read(walk, 0, now=0.1)
    walk.settle(0.1)
    assert walk.cut_by is None  # hits may still start
    walk.ran_out()
    walk.settle(0.1)
    assert walk.cut_by == pytest.approx(0.1 + straggler_grace(0.1))
    walk.settle(0.2)
    assert walk.cut_by == pytest.approx(0.1 + straggler_grace(0.1))  # set once


@pytest.mark.parametrize(
    ("slowest", "grace"),
    [
        (0.0, STRAGGLER_GRACE_S),
        (0.1, STRAGGLER_GRACE_S + 0.05),
        (0.5, STRAGGLER_GRACE_S + 0.25),
        (1.2, STRAGGLER_GRACE_S + 0.6),
    ],
)
def test_the_grace_grows_with_half_the_slowest_read_page(slowest: float, grace: float) -> None:
    # On a loaded host every page of a walk slows alike: a page one redirect further away
    # than the page read keeps its chance, so a replay cuts off the same pages.
    assert straggler_grace(slowest) == pytest.approx(grace)


@pytest.mark.parametrize("slowest", [0.05, 0.2, 0.43, 0.93, 2.0, 6.0])
def test_a_drip_never_holds_the_walk_past_one_and_a_half_times_it_plus_0_3_s(
    slowest: float,
) -> None:
    # Four pages read, the slowest taking ``slowest`` (started at 0, so the walk without the
    # drip ends then), the fifth still dripping: it is cut off by 1.5 x the walk + 0.3 s.
    walk = walk_with(0, 1, 2, 3, 4, wanted=5, budget=10)
    for index in range(4):
        walk.finished(index, read=True, now=slowest)
    walk.ran_out()
    walk.settle(slowest)

    assert walk.cut_by is not None
    assert walk.cut_loading(walk.cut_by) == [4]
    assert walk.cut_by <= 1.5 * slowest + 0.3


def test_the_grace_counts_from_the_last_page_read_not_from_when_the_drip_lost_its_place() -> None:
    # The drip holds the fifth place, so the walk learns that nothing is left to start only
    # once the drip loses its place (the patience after the last read page): that wait is
    # part of the grace, not added to it.
    walk = walk_with(0, 1, 2, 3, 4, wanted=5, budget=10)
    for index in range(4):
        read(walk, index, now=0.05)
    assert not walk.may_start(0.05)  # the drip holds its place
    walk.demote(0.05 + straggler_patience(0.05))
    assert walk.may_start(0.15)
    walk.ran_out()
    walk.settle(0.15)

    assert walk.cut_by == pytest.approx(0.05 + straggler_grace(0.05))


def test_a_slow_read_page_widens_the_grace_of_the_walk() -> None:
    walk = walk_with(0, 1, wanted=3)
    read(walk, 0, now=0.8)
    walk.ran_out()
    walk.settle(0.8)
    assert walk.cut_by == pytest.approx(0.8 + STRAGGLER_GRACE_S + 0.4)


# -- the cut-off --------------------------------------------------------------------------


def test_pages_still_loading_are_cut_off_once_the_grace_has_passed_and_only_once() -> None:
    walk = walk_with(0, 1, 2, wanted=3)
    read(walk, 0, now=0.1)
    assert walk.arrived(1, LIGHT)  # analysing: no straggler
    walk.ran_out()
    walk.settle(0.1)
    assert walk.cut_loading(0.2) == []
    assert walk.cut_loading(0.1 + straggler_grace(0.1)) == [2]
    assert walk.cut_loading(9.0) == []
    assert walk.patience_over
    assert walk.analysing.keys() == {1}


def test_held_heavy_pages_wait_while_anything_else_is_in_flight() -> None:
    walk = walk_with(0, 1, 2, wanted=3)
    assert not walk.arrived(0, HEAVY)
    read(walk, 1, now=0.1)
    assert walk.held_pages() is HeldPages.WAIT  # page 2 is still loading
    walk.finished(2, read=False, now=0.2)
    assert walk.held_pages() is HeldPages.CUT_OFF


def test_held_heavy_pages_are_analysed_in_list_order_when_no_page_was_read() -> None:
    walk = walk_with(3, 1, 2, wanted=3)
    assert not walk.arrived(3, HEAVY)
    assert not walk.arrived(1, HEAVY)
    walk.finished(2, read=False, now=0.2)
    assert walk.held_pages() is HeldPages.ANALYSE
    assert walk.release() == [1, 3]
    assert walk.held == {}
    assert walk.held_pages() is HeldPages.WAIT  # released pages are analysing
    walk.finished(1, read=True, now=0.9)
    assert walk.read == 1


def test_nothing_held_means_nothing_to_decide() -> None:
    walk = walk_with(0, wanted=1)
    read(walk, 0, now=0.1)
    assert walk.held_pages() is HeldPages.WAIT


def test_the_walk_is_out_of_time_at_its_stop() -> None:
    walk = PageWalk(2, 4, fetch_by=4.75, stop_at=4.9)
    assert not walk.out_of_time(4.8)
    assert walk.out_of_time(4.9)
    assert not PageWalk(2, 4).out_of_time(1e9)


def test_the_walk_wakes_for_the_nearest_rule_that_can_act() -> None:
    walk = PageWalk(3, 6, stop_at=9.0)
    for index in (0, 1):
        walk.started(index, 0.0)
    assert walk.wake_at() == 9.0
    read(walk, 0, now=0.5)
    assert walk.wake_at() == pytest.approx(0.5 + STRAGGLER_GRACE_S)  # the demotion
    walk.ran_out()
    walk.settle(0.5)
    walk.demote(0.75)
    assert walk.wake_at() == pytest.approx(0.5 + straggler_grace(0.5))  # the cut-off
    walk.cut_loading(0.5 + straggler_grace(0.5))
    assert walk.wake_at() == 9.0
    assert PageWalk(1, 2).wake_at() is None


# -- what to drop -------------------------------------------------------------------------


def test_a_page_left_unfinished_is_cut_off_by_what_it_was_doing() -> None:
    walk = walk_with(0, 1, 2, 3, wanted=4, budget=8)
    assert walk.arrived(1, LIGHT)
    assert not walk.arrived(2, HEAVY)
    assert walk.dropped(0) == CUT_OFF  # still loading
    assert walk.dropped(1) == CUT_OFF_ANALYSIS  # analysing
    assert walk.dropped(2) == CUT_OFF_ANALYSIS  # held
    walk.ran_out()
    walk.finished(1, read=True, now=0.1)
    walk.settle(0.1)
    assert walk.cut_loading(5.0) == [0, 3]
    assert walk.dropped(3) == CUT_OFF


# -- the markup measure --------------------------------------------------------------------


def test_markup_units_count_tags_and_attributes_of_markup_only() -> None:
    html = b'<p class="a" id="b">x = 1</p>'
    assert markup_units(html, "text/html") == 2 + 3
    assert markup_units(html, "application/xhtml+xml") == 5
    assert markup_units(html, "text/plain") == 0
    assert markup_units(b"%PDF-1.7 <<>>", "application/pdf") == 0


def test_the_budget_sits_between_long_prose_and_markup_bombs() -> None:
    prose = ("<p>" + "湛江港货物吞吐量达到2.6亿吨。" * 3 + "</p>\n") * 6000
    table = "<table>" + "<tr><td>1</td><td>2</td></tr>" * 10_000 + "</table>"
    attributes = "<div " + " ".join(f'a{i}="v"' for i in range(60_000)) + ">x</div>"
    assert markup_units(prose.encode(), "text/html") < ANALYSIS_MARKUP_BUDGET
    assert markup_units(table.encode(), "text/html") > ANALYSIS_MARKUP_BUDGET
    assert markup_units(attributes.encode(), "text/html") > ANALYSIS_MARKUP_BUDGET


def test_recorded_walks_give_each_walk_its_own_fates_and_the_last_for_any_more() -> None:
    hits = ("https://a.example/1", "https://b.example/2")
    recorded = RecordedWalks(
        [
            WalkRecord("searx", hits, ("read", CUT_OFF)),
            WalkRecord("searx", hits, ("read", "read")),
            WalkRecord("brave", hits, (CUT_OFF_ANALYSIS,)),
        ]
    )
    assert len(recorded) == 3
    assert recorded.take("searx", list(hits)) == ("read", CUT_OFF)
    assert recorded.take("searx", list(hits)) == ("read", "read")
    assert recorded.take("searx", list(hits)) == ("read", "read")  # the last, again
    assert recorded.take("brave", hits) == (CUT_OFF_ANALYSIS,)
    # Another adapter, other hits or another order: no recorded walk, the rules decide.
    assert recorded.take("tavily", hits) is None
    assert recorded.take("searx", hits[::-1]) is None
    assert recorded.take("searx", hits[:1]) is None


def test_a_page_started_after_the_last_read_still_gets_the_whole_grace() -> None:
    walk = walk_with(0, 1, wanted=3, budget=10)
    read(walk, 0, now=0.1)
    walk.finished(1, read=False, now=0.3)  # a bad page frees its place late
    assert walk.may_start(0.3)
    walk.started(2, 0.3)
    walk.ran_out()
    walk.settle(0.3)

    assert walk.cut_by == pytest.approx(0.3 + straggler_grace(0.1))
