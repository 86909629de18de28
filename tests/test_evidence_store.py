"""The evidence store: content-addressed captures, bounded reads, passages, exact quotes."""

from __future__ import annotations

import contextvars

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from external_query_service import ExternalQueryService, fixed_clock
from external_query_service._digests import sha256_digest
from external_query_service._evidence_store import (
    MAX_READ_CHARS,
    PASSAGE_CHARS,
    EvidenceEvicted,
    EvidenceStore,
    ref_digest,
)
from external_query_service.testing import LoopbackServer
from tests.support.world import NOW, PORT_QUESTION, World, serve_port_news


def long_text(paragraphs: int = 40) -> str:
    return "\n".join(
        f"第{n}段：湛江港今年的货物吞吐量继续增长，码头扩建工程按计划推进。" * 3
        for n in range(paragraphs)
    )


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(min_size=0, max_size=6000),
    limit=st.integers(min_value=0, max_value=10_000),
)
def test_bounded_reads_never_exceed_the_cap_and_paging_covers_the_whole_text(
    text: str, limit: int
) -> None:
    store = EvidenceStore()
    ref = store.put(text, source="https://example.test/")
    assert len(store.read(ref, 0, limit)) <= MAX_READ_CHARS

    pieces = []
    offset: int | None = 0
    while offset is not None:
        window = store.window(ref, offset)
        assert window.length == len(window.text) <= MAX_READ_CHARS
        assert window.total == len(text)
        pieces.append(window.text)
        offset = window.next_offset
    assert "".join(pieces) == text


def test_a_read_asking_for_more_than_the_cap_gets_exactly_the_cap() -> None:
    store = EvidenceStore()
    text = long_text()
    ref = store.put(text, source="s")
    assert len(text) > 3 * MAX_READ_CHARS
    assert store.read(ref, 100, 50_000) == text[100 : 100 + MAX_READ_CHARS]
    last = store.window(ref, len(text) - 10)
    assert last.text == text[-10:]
    assert last.next_offset is None


def test_negative_offsets_and_unknown_references_are_refused() -> None:
    store = EvidenceStore()
    ref = store.put("some text", source="s")
    with pytest.raises(ValueError, match="negative"):
        store.read(ref, -1)
    with pytest.raises(KeyError, match="unknown evidence reference"):
        store.window("ev:" + "0" * 64)


def test_describe_gives_source_length_digest_summary_and_metadata() -> None:
    store = EvidenceStore()
    text = "第一行   文字\n第二行"
    ref = store.put(text, source="https://docs.test/a", metadata={"title": "标题"})
    capture = store.describe(ref)
    assert capture.ref == "ev:" + sha256_digest(text).removeprefix("sha256:")
    assert (capture.source, capture.length) == ("https://docs.test/a", len(text))
    assert capture.digest == sha256_digest(text.encode("utf-8"))
    assert capture.summary == "第一行 文字 第二行"
    assert capture.metadata == {"title": "标题"}
    assert ref_digest(ref) == capture.digest  # the text's digest, read off its reference
    assert store.put(text, source="elsewhere") == ref
    assert [item.ref for item in store.references()] == [ref]


def test_passage_options_are_exact_slices_with_ids_that_resolve_again() -> None:
    store = EvidenceStore()
    text = long_text()
    ref = store.put(text, source="s")
    passages = store.passage_options(ref)
    assert len(passages) > 5
    for index, passage in enumerate(passages):
        assert passage.passage_id == f"{ref}#p{index}"
        assert passage.length <= PASSAGE_CHARS
        quoted = store.quote(ref, passage.offset, passage.length)
        assert quoted == text[passage.offset : passage.offset + passage.length]
        assert quoted.startswith(passage.preview.split(" ")[0])
        assert store.passage(passage.passage_id) == passage
    offsets = [passage.offset for passage in passages]
    assert offsets == sorted(offsets)


@pytest.mark.parametrize("passage_id", ["nonsense", "ev:abc#p0", "#p1", "{ref}#p9999", "{ref}#px"])
def test_passage_ids_that_name_nothing_are_refused(passage_id: str) -> None:
    store = EvidenceStore()
    ref = store.put(long_text(2), source="s")
    with pytest.raises(KeyError, match="unknown passage"):
        store.passage(passage_id.format(ref=ref))


def test_a_chain_snippets_ref_offset_and_length_reproduce_its_quote(
    loopback: LoopbackServer,
) -> None:
    world = World(loopback)
    question = PORT_QUESTION
    serve_port_news(world, question)
    store = EvidenceStore()
    with ExternalQueryService(
        world.settings(world.searxng()), clock=fixed_clock(NOW), store=store
    ) as service:
        answer = service.answer(question)

    body = [item for item in answer.evidence if item.basis == "page_body"]
    assert body, answer.model_dump_json(indent=2)
    for item in body:
        assert item.ref is not None
        assert store.quote(item.ref, item.offset, item.length) == item.snippet
        assert store.describe(item.ref).digest == item.content_digest
        assert store.describe(item.ref).source == item.url


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def page_text(n: int) -> str:
    return f"第{n}页：" + "航展新机型报道。" * 200  # about 3.2 KB as Python holds it


def test_the_store_evicts_least_recently_used_texts_to_stay_under_its_bound() -> None:
    store = EvidenceStore(20_000, hold_s=0)
    refs = [store.put(page_text(n), source=f"s{n}") for n in range(3)]
    store.read(refs[0])  # used: now the second is the least recently used
    for n in range(3, 40):
        store.put(page_text(n), source=f"s{n}")
        assert store.size <= 20_000
    assert len(store) < 10
    with pytest.raises(EvidenceEvicted, match="was evicted"):
        store.read(refs[1])
    with pytest.raises(KeyError, match="unknown evidence reference"):
        store.read("ev:" + "0" * 64)


def test_a_question_in_progress_keeps_its_texts_while_others_flood_the_store() -> None:
    ticks = Ticks()
    store = EvidenceStore(20_000, hold_s=600, clock=ticks)
    with store.question():
        mine = store.put(page_text(0), source="mine")
        elsewhere = contextvars.Context()  # another caller, outside this question
        for n in range(1, 40):
            elsewhere.run(store.put, page_text(n), f"other {n}")
            assert store.read(mine).startswith("第0页")
            assert store.size <= 20_000
    ticks.now += 599
    for n in range(40, 60):
        store.put(page_text(n), source=f"later {n}")
    assert store.read(mine).startswith("第0页")  # held for 600 s after its answer
    ticks.now += 2
    for n in range(60, 80):
        store.put(page_text(n), source=f"later {n}")
    with pytest.raises(EvidenceEvicted):
        store.read(mine)
    assert store.size <= 20_000


def test_the_bound_wins_over_the_hold_but_never_over_a_question_in_progress() -> None:
    # Many answers returned within the hold: their texts are held, yet the store stays
    # within its bound (the least recently used held ones go first).
    ticks = Ticks()
    store = EvidenceStore(20_000, hold_s=600, clock=ticks)
    refs = []
    for n in range(40):
        with store.question():
            refs.append(store.put(page_text(n), source=f"answer {n}"))
        assert store.size <= 20_000
    assert store.read(refs[-1]).startswith("第39页")
    with pytest.raises(EvidenceEvicted, match="while they fit in that bound"):
        store.read(refs[0])
    # A question still being answered keeps every text it stored, past the bound.
    with store.question():
        mine = [store.put(page_text(n), source=f"mine {n}") for n in range(100, 110)]
        assert store.size > 20_000
        assert all(store.read(ref) for ref in mine)
    assert store.size <= 20_000


def test_a_capture_whose_hold_ended_goes_before_held_ones_used_longer_ago() -> None:
    ticks = Ticks()
    store = EvidenceStore(20_000, hold_s=600, clock=ticks)
    with store.question():
        early = store.put(page_text(0), source="early")
    ticks.now += 100
    with store.question():
        held = [store.put(page_text(n), source=f"held {n}") for n in range(1, 4)]
    ticks.now += 550  # the early answer's hold has ended, the others' have not
    assert store.read(early).startswith("第0页")  # now the most recently used
    for n in range(10, 13):  # outside any question: past the bound
        store.put(page_text(n), source=f"later {n}")
        assert store.size <= 20_000
    with pytest.raises(EvidenceEvicted):
        store.read(early)
    assert all(store.read(ref) for ref in held)


def test_a_text_shared_by_two_questions_is_kept_until_both_are_done() -> None:
    ticks = Ticks()
    store = EvidenceStore(8_000, hold_s=0, clock=ticks)
    with store.question():
        with store.question():
            shared = store.put(page_text(0), source="shared")
        for n in range(1, 10):
            store.put(page_text(n), source=f"other {n}")
        assert store.read(shared).startswith("第0页")
    store.put(page_text(10), source="after")
    with pytest.raises(EvidenceEvicted):
        store.read(shared)
