"""Click attribution: stream outcomes equal the reference for any arrival within grace."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.ads import keys
from streamjoin.ads.attribution import (
    Click,
    ClickOutcome,
    Impression,
    Outcome,
    TaskAttribution,
    attribute,
)
from streamjoin.ads.events import dump_state, loads
from streamjoin.join.errors import JoinConfigError
from streamjoin.join.policy import Late
from streamjoin.join.state import MemoryState
from streamjoin.join.window import JoinWindow

WINDOW = JoinWindow(before=0, after=30, grace=10)


def _batch(task: TaskAttribution, batch: Sequence[Impression | Click]) -> dict[str, Outcome]:
    """Feed *batch* as the runtime does in per-chunk mode (one chunk, then the
    checkpoint); the outcomes it emitted, by click id."""
    out: list[ClickOutcome | Late] = []
    for record in batch:
        if isinstance(record, Impression):
            out.extend(task.on_left(record))
        else:
            out.extend(task.on_right(record))
    out.extend(task.settle())
    task.checkpoint()
    return {o.click_id: o.outcome for o in out if isinstance(o, ClickOutcome)}


def _restored(window: JoinWindow, changes: Iterable[tuple[bytes, bytes | None]]) -> TaskAttribution:
    """A task in per-chunk mode opened on the state *changes* restore."""
    task = TaskAttribution(
        window,
        MemoryState.from_changelog(changes),
        auto_checkpoint=False,
        decide_per_chunk=True,
    )
    task.rebuild_indexes()
    return task


@st.composite
def events(draw: st.DrawFn) -> tuple[list[Impression], list[Click], JoinWindow]:
    window = JoinWindow(
        before=draw(st.integers(0, 5)),
        after=draw(st.integers(0, 40)),
        grace=draw(st.integers(0, 20)),
    )
    keys = [f"a{i}" for i in range(draw(st.integers(1, 4)))]
    imps = [
        Impression(
            draw(st.sampled_from(keys)), f"i{n}", draw(st.integers(0, 200)), f"c{n % 3}", 0.5
        )
        for n in range(draw(st.integers(0, 8)))
    ]
    clicks = [
        Click(draw(st.sampled_from(keys)), f"k{n}", draw(st.integers(0, 240)))
        for n in range(draw(st.integers(0, 14)))
    ]
    return imps, clicks, window


def _run(
    imps: list[Impression], clicks: list[Click], window: JoinWindow, rnd: random.Random
) -> tuple[dict[str, ClickOutcome], list[Late]]:
    """Feed the records in an arrival order that stays within grace."""
    records: list[Impression | Click] = [*imps, *clicks]
    # arrival position = event time + a jitter of at most grace: never late
    order = sorted(records, key=lambda r: (r.ts + rnd.randint(0, window.grace), rnd.random()))
    task = TaskAttribution(window)
    outcomes: dict[str, ClickOutcome] = {}
    late: list[Late] = []
    for record in order:
        emitted = (
            task.on_impression(record) if isinstance(record, Impression) else task.on_click(record)
        )
        for item in emitted:
            if isinstance(item, Late):
                late.append(item)
            else:
                assert item.click_id not in outcomes, "a click got two outcomes"
                outcomes[item.click_id] = item
    for item in task.flush():
        assert isinstance(item, ClickOutcome)
        assert item.click_id not in outcomes
        outcomes[item.click_id] = item
    return outcomes, late


@settings(max_examples=300, deadline=None)
@given(events(), st.randoms(use_true_random=False))
def test_outcomes_equal_the_reference_for_any_arrival_within_grace(
    data: tuple[list[Impression], list[Click], JoinWindow], rnd: random.Random
) -> None:
    imps, clicks, window = data
    outcomes, late = _run(imps, clicks, window, rnd)
    assert late == []
    assert outcomes == attribute(imps, clicks, window)
    # one billed click per impression at most, every click exactly one outcome
    billed = [o.impression_id for o in outcomes.values() if o.outcome is Outcome.ATTRIBUTED]
    assert len(billed) == len(set(billed))
    assert set(outcomes) == {c.click_id for c in clicks}


def test_earliest_click_is_billed_later_ones_are_duplicates_orphans_unattributed() -> None:
    task = TaskAttribution(WINDOW)
    out = []
    out += task.on_impression(Impression("a", "i1", 100, "camp", 0.25))
    out += task.on_click(Click("a", "k2", 120))
    out += task.on_click(Click("a", "k1", 115))  # earlier by event time, arrives later
    out += task.on_click(Click("b", "k3", 118))  # no impression for b
    assert out == []  # nothing is final before decision time passes ts + grace
    out += task.on_click(Click("a", "k4", 131))  # outside the 30 ms window
    out += task.on_impression(Impression("z", "i9", 200))
    assert task.decision_time == 131  # the clicks' watermark holds decisions back
    out += task.set_idle("right", True)  # clicks caught up and silent: idle
    kinds = {o.click_id: o.outcome for o in out if isinstance(o, ClickOutcome)}
    assert kinds == {
        "k1": Outcome.ATTRIBUTED,
        "k2": Outcome.DUPLICATE,
        "k3": Outcome.UNATTRIBUTED,
        "k4": Outcome.UNATTRIBUTED,
    }
    billed = next(o for o in out if isinstance(o, ClickOutcome) and o.click_id == "k1")
    assert (billed.impression_id, billed.campaign, billed.cost) == ("i1", "camp", 0.25)


def test_late_records_are_reported_not_joined() -> None:
    task = TaskAttribution(WINDOW)
    task.on_impression(Impression("a", "i1", 100))
    task.on_click(Click("a", "k0", 200))
    # 95 ms behind its own input, but nothing is decided past 100: not late yet
    assert task.on_click(Click("a", "k9", 105)) == []
    task.on_impression(Impression("z", "i9", 200))
    assert task.decision_time == 200
    emitted = task.on_click(Click("a", "k1", 105))  # 105 + grace 10 < 200: late
    assert [type(e) for e in emitted] == [Late]
    assert emitted[0].decided == 200 and emitted[0].side == "click"
    assert task.late_count == 1
    assert "k1" not in {o.click_id for o in task.flush() if isinstance(o, ClickOutcome)}


def test_a_replayed_click_gets_the_same_outcome_not_a_second_bill() -> None:
    task = TaskAttribution(WINDOW)
    task.on_impression(Impression("a", "i1", 100))
    task.on_click(Click("a", "k1", 110))
    task.on_impression(Impression("a", "i2", 125))
    first = [o for o in task.on_click(Click("z", "k9", 130)) if isinstance(o, ClickOutcome)]
    assert [o.outcome for o in first] == [Outcome.ATTRIBUTED]
    again = [o for o in task.on_click(Click("a", "k1", 110)) if isinstance(o, ClickOutcome)]
    assert again == first


def test_state_stays_flat_across_many_windows() -> None:
    task = TaskAttribution(WINDOW)
    sizes = []
    for n in range(5_000):
        ts = n * 7
        task.on_impression(Impression(f"a{n}", f"i{n}", ts))
        task.on_click(Click(f"a{n}", f"k{n}", ts + 3))
        if n % 500 == 499:
            sizes.append(task.stored())
    assert max(sizes) == min(sizes) or max(sizes) - min(sizes) <= 2, sizes
    assert max(sizes) < 40  # a window and grace worth of records, not 10,000


@pytest.mark.parametrize("bad", [{"before": -1}, {"after": 1.5}, {"grace": True}])
def test_window_rejects_bad_values(bad: dict[str, object]) -> None:
    values: dict[str, object] = {"before": 0, "after": 30, "grace": 10, **bad}
    with pytest.raises(JoinConfigError, match="non-negative number of milliseconds"):
        JoinWindow(**values)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(events(), st.randoms(use_true_random=False), st.data())
def test_a_crash_and_replay_yields_the_same_outcomes_and_no_second_bill(
    data: tuple[list[Impression], list[Click], JoinWindow],
    rnd: random.Random,
    draw: st.DataObject,
) -> None:
    """The operator's protocol, in miniature: records are processed in batches;
    a batch's outputs are durable before its state changes reach the changelog,
    and its last change is the input position. A crash during batch j leaves
    the changelog with batches < j and any prefix of batch j's changes; the
    restored task replays from the restored position (the end of batch j-1)."""
    imps, clicks, window = data
    records: list[Impression | Click] = [*imps, *clicks]
    order = sorted(records, key=lambda r: (r.ts + rnd.randint(0, window.grace), rnd.random()))
    sizes = draw.draw(st.lists(st.integers(1, 4), min_size=1, max_size=len(order) + 1))
    bounds = [0]
    for size in sizes:
        bounds.append(min(len(order), bounds[-1] + size))
    first = TaskAttribution(window, auto_checkpoint=False)
    assert isinstance(first.state, MemoryState)
    first.state.record_changelog = True
    crashed = draw.draw(st.integers(0, len(bounds) - 2), label="crash in batch")
    emitted: dict[str, set[ClickOutcome]] = {}
    batch_start = 0
    for j in range(crashed + 1):
        batch_start = len(first.state.changelog)
        for record in order[bounds[j] : bounds[j + 1]]:
            feed = first.on_impression if isinstance(record, Impression) else first.on_click
            for item in feed(record):  # type: ignore[arg-type]
                assert isinstance(item, ClickOutcome)
                emitted.setdefault(item.click_id, set()).add(item)
        first.checkpoint()
    cut = draw.draw(st.integers(batch_start, len(first.state.changelog)), label="cut")
    restored = MemoryState.from_changelog(first.state.changelog[:cut])
    second = TaskAttribution(window, restored, auto_checkpoint=False)
    second.rebuild_indexes()
    replayed_late = []
    for record in order[bounds[crashed] :]:
        feed = second.on_impression if isinstance(record, Impression) else second.on_click
        for item in feed(record):  # type: ignore[arg-type]
            if isinstance(item, Late):
                replayed_late.append(item.record)
                continue
            emitted.setdefault(item.click_id, set()).add(item)
    for item in second.flush():
        assert isinstance(item, ClickOutcome)
        emitted.setdefault(item.click_id, set()).add(item)
    reference = attribute(imps, clicks, window)
    assert {cid: len(outs) for cid, outs in emitted.items() if len(outs) != 1} == {}
    assert {cid: next(iter(outs)) for cid, outs in emitted.items()} == reference
    # a replayed record may be reported late only if batch j had already
    # applied (and expired) it: it belongs to the batch that was cut short
    crashed_batch = order[bounds[crashed] : bounds[crashed + 1]]
    assert all(r in crashed_batch for r in replayed_late)


def test_a_cut_anywhere_in_a_batch_never_bills_an_impression_twice() -> None:
    """Per-chunk mode: an impression's chunk reaches the state before the row of a
    click that billed it (the billing is read back from that row on restore),
    so whatever prefix of the batch a crash leaves, the replay bills it once."""
    window = JoinWindow(before=0, after=30, grace=10)
    batch: list[Impression | Click] = [
        Impression("a", "i1", 0, "camp", 0.5),
        Click("a", "k1", 5),
        Click("a", "k2", 6),
        Impression("b", "i2", 20, "camp", 0.5),
        Click("b", "k3", 20),
    ]

    def run(task: TaskAttribution) -> dict[str, Outcome]:
        decided = _batch(task, batch)
        return decided | {
            o.click_id: o.outcome for o in task.flush() if isinstance(o, ClickOutcome)
        }

    first = TaskAttribution(window, auto_checkpoint=False, decide_per_chunk=True)
    assert isinstance(first.state, MemoryState)
    first.state.record_changelog = True
    want = run(first)
    assert want == {"k1": Outcome.ATTRIBUTED, "k2": Outcome.DUPLICATE, "k3": Outcome.ATTRIBUTED}
    changes = first.state.changelog
    assert len(changes) >= 4
    for cut in range(len(changes) + 1):
        second = _restored(window, changes[:cut])
        assert run(second) == want, f"cut after {cut} of {len(changes)} changes"


def test_a_click_before_its_impression_keeps_the_billing_for_a_restore() -> None:
    """With ``before`` > 0 a click earlier than its impression may bill it; its row
    (which says so) must outlive the impression, or a restored task would bill
    the impression again for a later click."""
    window = JoinWindow(before=20, after=10, grace=0)
    batches: list[list[Impression | Click]] = [
        [
            Impression("a", "i1", 100, "camp", 0.5),
            Click("a", "k1", 80),  # bills i1 (100 - 20 <= 80)
            Click("a", "k2", 110),  # a duplicate of k1, decided after 130
            Impression("b", "i2", 105, "camp", 0.5),
        ],
        # decision time 125: k1 (80) is behind the retention, i1 (100) is not
        [Impression("b", "i3", 125, "camp", 0.5), Click("b", "k3", 125)],
        [Impression("b", "i4", 140, "camp", 0.5), Click("b", "k4", 140)],
    ]

    first = TaskAttribution(window, auto_checkpoint=False, decide_per_chunk=True)
    assert _batch(first, batches[0]) == {"k1": Outcome.ATTRIBUTED}
    _batch(first, batches[1])
    second = TaskAttribution(window, first.state, auto_checkpoint=False, decide_per_chunk=True)
    second.rebuild_indexes()
    assert _batch(second, batches[2])["k2"] is Outcome.DUPLICATE


def test_a_state_written_before_impression_chunks_is_read_and_expires() -> None:
    """Rows of the format before 0.3 (one row per impression, its billing in it)
    are held, billed and counted as written, and deleted when they expire."""
    window = JoinWindow(before=0, after=30, grace=10)
    old = MemoryState()
    i1 = keys.record_key(keys.IMPRESSION, "a", 100, "i1")
    old.put(i1, dump_state({"campaign": "camp", "cost": 0.5, "billed": "k1"}))
    old.put(
        keys.record_key(keys.CLICK, "a", 105, "k1"),
        dump_state({"o": "attributed", "imp": "i1", "campaign": "camp", "cost": 0.5}),
    )
    task = TaskAttribution(window, old, auto_checkpoint=False, decide_per_chunk=True)
    task.rebuild_indexes()
    out = [
        *task.on_right(Click("a", "k2", 110)),
        *task.on_left(Impression("b", "i2", 200, "camp", 1.0)),
    ]
    out += [*task.on_right(Click("b", "k3", 200)), *task.settle()]
    task.checkpoint()
    outcomes = {o.click_id: o.outcome for o in out if isinstance(o, ClickOutcome)}
    assert outcomes == {"k2": Outcome.DUPLICATE}
    assert old.get(i1) is None  # expired with its segment (decision time 200)
    counts = task.campaign_counts()["camp"]
    assert (counts.impressions, counts.billed_clicks, counts.spend) == (2, 1, 0.5)


def test_a_click_pending_across_batches_leaves_one_decided_entry_whatever_the_cut() -> None:
    """The clicks still pending at the end of a batch are a pending chunk; once they
    are decided their entries are written before that chunk is deleted, so any cut
    restores either the pending click (decided again by the replay) or its
    outcome (whose output was acked before any change), and no row is left over."""
    window = JoinWindow(before=0, after=30, grace=10)
    first_batch: list[Impression | Click] = [
        Impression("a", "i1", 0, "camp", 0.5),
        Click("a", "k1", 5),  # due at 15: still pending at the end of this batch
    ]
    second_batch: list[Impression | Click] = [
        Impression("b", "i2", 20, "camp", 0.5),
        Click("b", "k2", 20),
    ]

    first = TaskAttribution(window, auto_checkpoint=False, decide_per_chunk=True)
    assert isinstance(first.state, MemoryState)
    first.state.record_changelog = True
    assert _batch(first, first_batch) == {}
    start = len(first.state.changelog)
    delivered = _batch(first, second_batch)
    assert delivered == {"k1": Outcome.ATTRIBUTED}
    changes = first.state.changelog
    for cut in range(start, len(changes) + 1):
        second = _restored(window, changes[:cut])
        restored = second.state
        replayed = _batch(second, second_batch)
        # a change reaches the changelog only once the batch's outputs are acked:
        # with none of them restored, the replay must emit k1's outcome itself
        emitted = replayed if cut == start else {**delivered, **replayed}
        assert emitted == {"k1": Outcome.ATTRIBUTED}, f"cut at {cut}"
        # one pending chunk is left, k2's: k1's went once it was decided
        chunks = restored.scan(*keys.family_range(keys.PENDING))
        assert [loads(raw) for _, raw in chunks] == [[["b", 20, "k2"]]]
        assert restored.scan(*keys.family_range(keys.CLICK)) == []


@pytest.mark.parametrize("restart", [False, True], ids=["one task", "restarted before expiry"])
def test_a_pending_chunk_never_outlives_the_decided_entry_of_a_click_it_lists(
    restart: bool,
) -> None:
    """Two clicks pending at the end of a batch share a pending chunk. When the
    first one's decided entry expires, batches later, while the second is still
    pending, the chunk is written anew without it first: whatever cut of that
    batch a restore reads, the first click is never pending again (the replay
    does not hold it: it would get a second outcome), and the others get one.
    With *restart* the task is restored between the decision and the expiry:
    it learns from the decided entries' segments which chunk lists the click."""
    window = JoinWindow(before=0, after=30, grace=10)  # retention 40, segment 5
    batches: list[list[Impression | Click]] = [
        [Click("a", "k1", 0), Click("b", "k2", 300)],  # no impression yet: both pending
        [Impression("c", "i1", 25, "camp", 0.5), Click("c", "k3", 25)],  # k1 is due
        [Impression("d", "i2", 150, "camp", 0.5), Click("d", "k4", 150)],  # k1 expires
    ]
    first = TaskAttribution(window, auto_checkpoint=False, decide_per_chunk=True)
    assert isinstance(first.state, MemoryState)
    first.state.record_changelog = True
    assert _batch(first, batches[0]) == {}
    pending = first.state.scan(*keys.family_range(keys.PENDING))
    assert [loads(raw) for _, raw in pending] == [[["a", 0, "k1"], ["b", 300, "k2"]]]
    assert _batch(first, batches[1]) == {"k1": Outcome.UNATTRIBUTED}
    assert ("a", 0, "k1") in first.clicks.values  # not expired yet
    before: list[tuple[bytes, bytes | None]] = []
    if restart:
        before = list(first.state.changelog)
        first = _restored(window, before)
        assert isinstance(first.state, MemoryState)
        first.state.record_changelog = True
    start = len(first.state.changelog)
    delivered = _batch(first, batches[2])
    assert delivered == {"k3": Outcome.ATTRIBUTED}
    changes = first.state.changelog
    assert ("a", 0, "k1") not in first.clicks.values
    # k1's pending chunk now lists k2 alone (k4 is pending in the batch's own)
    pending = first.state.scan(*keys.family_range(keys.PENDING))
    assert [loads(raw) for _, raw in pending] == [[["b", 300, "k2"]], [["d", 150, "k4"]]]
    for cut in range(start, len(changes) + 1):
        second = _restored(window, [*before, *changes[:cut]])
        replayed = _batch(second, batches[2])
        replayed |= {o.click_id: o.outcome for o in second.flush() if isinstance(o, ClickOutcome)}
        assert "k1" not in replayed, f"cut at {cut}: k1 pending again"
        # a change reaches the changelog only once the batch's outputs are acked
        emitted = replayed if cut == start else {**delivered, **replayed}
        assert all(delivered[c] == o for c, o in replayed.items() if c in delivered), cut
        assert emitted == {
            "k2": Outcome.UNATTRIBUTED,
            "k3": Outcome.ATTRIBUTED,
            "k4": Outcome.ATTRIBUTED,
        }, f"cut at {cut} of {len(changes)}"


def test_a_click_listed_by_two_pending_chunks_is_in_neither_once_its_entry_expires() -> None:
    """A state whose pending chunks both list one click (k2), each with a click
    of its own: once k2 is decided and its entry expires while k3, listed
    with it in the second chunk, still waits, neither chunk lists k2, so a
    restore never holds it pending again."""
    window = JoinWindow(before=0, after=30, grace=10)  # retention 40, segment 5
    state = MemoryState()
    first = [["a", 0, "k1"], ["b", 1, "k2"]]
    second = [["b", 1, "k2"], ["c", 300, "k3"]]
    state.put(keys.record_key(keys.PENDING, "a", 0, "k1"), dump_state(first))
    state.put(keys.record_key(keys.PENDING, "c", 300, "k3"), dump_state(second))
    task = TaskAttribution(window, state, auto_checkpoint=False, decide_per_chunk=True)
    task.rebuild_indexes()
    assert task.pending == 3
    decided = _batch(task, [Impression("z", "i1", 45, "camp", 0.5), Click("z", "k9", 45)])
    assert decided == {"k1": Outcome.UNATTRIBUTED, "k2": Outcome.UNATTRIBUTED}
    later: list[Impression | Click] = [
        Impression("y", "i2", 150, "camp", 0.5),
        Click("y", "k8", 150),
    ]
    assert _batch(task, later) == {"k9": Outcome.ATTRIBUTED}
    assert ("b", 1, "k2") not in task.clicks.values  # its entry expired
    assert [loads(raw) for _, raw in state.scan(*keys.family_range(keys.PENDING))] == [
        [["c", 300, "k3"]],
        [["y", 150, "k8"]],
    ]
    restored = _restored(window, list(state.items()))
    assert restored.pending == 2
    again = {o.click_id: o.outcome for o in restored.flush() if isinstance(o, ClickOutcome)}
    assert again == {"k3": Outcome.UNATTRIBUTED, "k8": Outcome.ATTRIBUTED}


def test_a_pending_click_row_of_the_format_before_0_3_is_read_and_deleted_once_decided() -> None:
    """A pending click stored as a row of its own (``c``, before 0.3) is held as
    pending after a restore, decided once, and its row deleted after its entry
    is written."""
    window = JoinWindow(before=0, after=30, grace=10)
    old = MemoryState()
    old.put(keys.record_key(keys.CLICK, "a", 5, "k1"), dump_state({"o": None}))
    task = TaskAttribution(window, old, auto_checkpoint=False, decide_per_chunk=True)
    task.rebuild_indexes()
    assert task.pending == 1
    later: list[Impression | Click] = [Impression("b", "i1", 40, "camp", 0.5), Click("b", "k2", 40)]
    assert _batch(task, later) == {"k1": Outcome.UNATTRIBUTED}
    assert old.scan(*keys.family_range(keys.CLICK)) == []
    assert [loads(raw) for _, raw in old.scan(*keys.family_range(keys.PENDING))] == [
        [["b", 40, "k2"]]
    ]
