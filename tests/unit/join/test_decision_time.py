"""Decision time = min of the inputs' watermarks: no record is late, whatever the fetch order.

The guarantee under test (docs/joins.rst): when every input's own disorder is
at most ``grace``, no record is late and every outcome equals the reference,
whatever the interleaving of the two inputs — one input entirely before the
other included — and whatever crash-and-replay cut happens on the way.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.ads.attribution import (
    CampaignCounts,
    Click,
    ClickOutcome,
    Impression,
    Outcome,
    TaskAttribution,
    attribute,
)
from streamjoin.join.policy import LEFT, RIGHT, Late
from streamjoin.join.state import MemoryState
from streamjoin.join.watermarks import Watermarks
from streamjoin.join.window import JoinWindow
from streamjoin.join.windowed import JoinKind, JoinRecord, TaskWindowedJoin, windowed_join

MODES = ("left-first", "right-first", "merged")


@st.composite
def ad_events(draw: st.DrawFn) -> tuple[list[Impression], list[Click], JoinWindow]:
    window = JoinWindow(
        before=draw(st.integers(0, 5)),
        after=draw(st.integers(0, 40)),
        grace=draw(st.integers(0, 20)),
    )
    keys = [f"a{i}" for i in range(draw(st.integers(1, 4)))]
    imps = [
        Impression(
            draw(st.sampled_from(keys)),
            f"i{n}",
            draw(st.integers(0, 300)),
            draw(st.sampled_from(["c", "d"])),
            draw(st.sampled_from([0.5, 0.25, 1.1])),
        )
        for n in range(draw(st.integers(0, 10)))
    ]
    clicks = [
        Click(draw(st.sampled_from(keys)), f"k{n}", draw(st.integers(0, 340)))
        for n in range(draw(st.integers(0, 14)))
    ]
    return imps, clicks, window


def _own_order(records: list[Any], grace: int, rnd: random.Random) -> list[Any]:
    """One input's arrival order: each record at most ``grace`` behind the ones before it."""
    return sorted(records, key=lambda r: (r.ts + rnd.randint(0, grace), rnd.random()))


def _interleave(
    lefts: list[Any], rights: list[Any], mode: str, rnd: random.Random
) -> list[tuple[str, Any]]:
    """Both inputs, each in its own order, interleaved as a consumer might fetch them."""
    tagged_l = [(LEFT, r) for r in lefts]
    tagged_r = [(RIGHT, r) for r in rights]
    if mode == "left-first":
        return tagged_l + tagged_r
    if mode == "right-first":
        return tagged_r + tagged_l
    out: list[tuple[str, Any]] = []
    while tagged_l or tagged_r:
        pick = tagged_l if tagged_l and (not tagged_r or rnd.random() < 0.5) else tagged_r
        out.append(pick.pop(0))
    return out


def _run_with_crash(
    make: Callable[[MemoryState | None], Any],
    order: list[tuple[str, Any]],
    sizes: list[int],
    crashed: int,
    cut_at: float,
    chunk: int = 0,
) -> tuple[list[Any], list[Late], list[Any], Any]:
    """Feed *order* in batches, crash during batch *crashed* (the changelog cut at a
    fraction *cut_at* of that batch's changes), restore, replay from the batch's start.

    With *chunk*, the task is settled after every *chunk* records fed (a
    checkpoint may come between two: a batch need not end on a chunk's end).
    Returns every emitted result, the late items of the first run, the
    records reported late on replay and the task that replayed.
    """
    bounds = [0]
    for size in sizes:
        bounds.append(min(len(order), bounds[-1] + size))
    crashed = min(crashed, len(bounds) - 2)
    first = make(None)
    first.state.record_changelog = True
    results: list[Any] = []
    late: list[Late] = []

    fed = [0]

    def feed(task: Any, side: str, record: Any, sink_late: list[Any]) -> None:
        items = list(task.on_left(record) if side == LEFT else task.on_right(record))
        fed[0] += 1
        if chunk and fed[0] % chunk == 0:
            items.extend(task.settle())
        for item in items:
            (sink_late.append(item) if isinstance(item, Late) else results.append(item))

    start = 0
    for j in range(crashed + 1):
        start = len(first.state.changelog)
        for side, record in order[bounds[j] : bounds[j + 1]]:
            feed(first, side, record, late)
        first.checkpoint()
    cut = start + int((len(first.state.changelog) - start) * cut_at)
    second = make(MemoryState.from_changelog(first.state.changelog[:cut]))
    second.rebuild_indexes()
    replayed_late: list[Any] = []
    for side, record in order[bounds[crashed] :]:
        feed(second, side, record, replayed_late)
    second.checkpoint()
    # end of input: both inputs caught up and silent
    for side in (LEFT, RIGHT):
        for item in second.set_idle(side, True):
            (late.append(item) if isinstance(item, Late) else results.append(item))
    results.extend(second.flush())
    crashed_batch = [r for _, r in order[bounds[crashed] : bounds[crashed + 1]]]
    # a replayed record may be reported late only if the cut batch had applied it
    assert all(item.record in crashed_batch for item in replayed_late)
    return results, late, crashed_batch, second


def _check_ads(
    data: tuple[list[Impression], list[Click], JoinWindow],
    mode: str,
    rnd: random.Random,
    sizes: list[int],
    crashed: int,
    cut_at: float,
    chunk: int = 0,
) -> None:
    imps, clicks, window = data
    order = _interleave(
        _own_order(imps, window.grace, rnd), _own_order(clicks, window.grace, rnd), mode, rnd
    )
    results, late, _, task = _run_with_crash(
        lambda state: TaskAttribution(
            window, state, auto_checkpoint=False, decide_per_chunk=chunk > 0
        ),
        order,
        sizes,
        crashed,
        cut_at,
        chunk,
    )
    assert late == [], f"{mode}: on-time records reported late: {late}"
    got: dict[str, set[ClickOutcome]] = {}
    for item in results:
        got.setdefault(item.click_id, set()).add(item)
    assert {c: len(o) for c, o in got.items() if len(o) != 1} == {}, "two outcomes for a click"
    reference = attribute(imps, clicks, window)
    assert {c: next(iter(o)) for c, o in got.items()} == reference
    # the per-campaign counts, a view of the state: exact whatever the cut
    billed = [o for o in reference.values() if o.outcome is Outcome.ATTRIBUTED]
    want = {
        c: CampaignCounts(
            sum(1 for i in imps if i.campaign == c),
            sum(1 for o in billed if o.campaign == c),
            sum(round((o.cost or 0.0) * 1e6) for o in billed if o.campaign == c) / 1e6,
        )
        for c in sorted({i.campaign for i in imps})
    }
    assert task.campaign_counts() == want


@settings(max_examples=800, deadline=None)
@given(
    ad_events(),
    st.sampled_from(MODES),
    st.randoms(use_true_random=False),
    st.lists(st.integers(1, 5), min_size=1, max_size=30),
    st.integers(0, 30),
    st.floats(0, 1),
    st.integers(0, 6),
)
def test_ad_outcomes_equal_the_reference_and_nothing_is_late_for_any_fetch_order(
    data: tuple[list[Impression], list[Click], JoinWindow],
    mode: str,
    rnd: random.Random,
    sizes: list[int],
    crashed: int,
    cut_at: float,
    chunk: int,
) -> None:
    """Also in the runtime's mode (*chunk* > 0, ``decide_per_chunk``): due clicks
    decided after each chunk of records only, records written in chunks per
    segment, pending clicks at the checkpoint; the same outcomes and counts,
    whatever the crash cut, the fetch order and where chunks end."""
    _check_ads(data, mode, rnd, sizes, crashed, cut_at, chunk)


@st.composite
def join_records(draw: st.DrawFn) -> tuple[list[JoinRecord], list[JoinRecord], JoinWindow]:
    window = JoinWindow(
        before=draw(st.integers(0, 10)),
        after=draw(st.integers(0, 30)),
        grace=draw(st.integers(0, 15)),
    )
    keys = [f"k{i}" for i in range(draw(st.integers(1, 3)))]

    def records(prefix: str, n: int) -> list[JoinRecord]:
        return [
            JoinRecord(draw(st.sampled_from(keys)), f"{prefix}{i}", draw(st.integers(0, 200)), b"")
            for i in range(n)
        ]

    return (
        records("l", draw(st.integers(0, 8))),
        records("r", draw(st.integers(0, 8))),
        window,
    )


@settings(max_examples=300, deadline=None)
@given(
    join_records(),
    st.sampled_from(MODES),
    st.sampled_from(list(JoinKind)),
    st.randoms(use_true_random=False),
    st.lists(st.integers(1, 5), min_size=1, max_size=20),
    st.integers(0, 20),
    st.floats(0, 1),
)
def test_windowed_joins_equal_the_reference_and_nothing_is_late_for_any_fetch_order(
    data: tuple[list[JoinRecord], list[JoinRecord], JoinWindow],
    mode: str,
    kind: JoinKind,
    rnd: random.Random,
    sizes: list[int],
    crashed: int,
    cut_at: float,
) -> None:
    lefts, rights, window = data
    order = _interleave(
        _own_order(lefts, window.grace, rnd), _own_order(rights, window.grace, rnd), mode, rnd
    )
    results, late, _, _ = _run_with_crash(
        lambda state: TaskWindowedJoin(kind, window, state), order, sizes, crashed, cut_at
    )
    assert late == []
    reference = {r.ids: r for r in windowed_join(kind, window, lefts, rights)}
    assert {r.ids: r for r in results} == reference
    # a result may come again only on replay, with the same value
    assert len({(r.ids, r) for r in results}) == len(reference)


def test_the_property_fails_with_a_single_stream_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation check: decide on the largest event time of both inputs (the old
    single stream time) and the same property finds late records and lost bills."""
    rnd = random.Random(7)
    window = JoinWindow(before=0, after=30, grace=10)
    imps = [Impression(f"a{n}", f"i{n}", n * 20, "c", 0.5) for n in range(20)]
    clicks = [Click(f"a{n}", f"k{n}", n * 20 + 5) for n in range(20)]
    case = ((imps, clicks, window), "right-first", rnd, [100], 0, 1.0)
    _check_ads(*case)  # the real rule: passes

    def single_stream_time(self: Watermarks) -> int | None:
        known = [m for m in self.marks.values() if m is not None]
        return max(known) if known else None

    monkeypatch.setattr(Watermarks, "current", single_stream_time)
    with pytest.raises(AssertionError, match="reported late"):
        _check_ads(*case)


def test_an_idle_input_lets_outcomes_out_and_its_older_records_are_dead_lettered() -> None:
    window = JoinWindow(before=0, after=30, grace=10)
    task = TaskAttribution(window)
    task.on_impression(Impression("a", "i1", 100))
    assert task.on_click(Click("a", "k1", 110)) == []
    assert task.on_click(Click("a", "k2", 400)) == []
    assert task.decision_time == 100  # the impressions' watermark holds everything back
    # impressions caught up and silent for max_idle_ms: the runtime reports them idle
    out = task.set_idle(LEFT, True)
    assert [(o.click_id, o.outcome.value) for o in out] == [("k1", "attributed")]
    assert task.decision_time == 400
    # its next record is older than what was decided: dead-lettered with the reason
    (late,) = task.on_impression(Impression("a", "i2", 380))
    assert isinstance(late, Late) and late.side == "impression" and late.decided == 400
    reason = late.emission(window.grace).value.decode()
    assert reason == "late: impression record ts_ms 380 + grace 10 ms is below decision time 400"
    # and the input is active again: decisions wait for it
    assert LEFT not in task.marks.idle
    assert task.on_click(Click("a", "k3", 500)) == []
    assert task.decision_time == 400


def test_watermarks_survive_the_changelog_and_read_a_single_stream_time() -> None:
    marks = Watermarks((LEFT, RIGHT))
    marks.observe(LEFT, 120)
    marks.observe(RIGHT, 90)
    assert marks.advance() == 90
    again = Watermarks.decode((LEFT, RIGHT), marks.encode())
    assert again.marks == {LEFT: 120, RIGHT: 90} and again.decided == 90 and not again.idle
    legacy = Watermarks.decode((LEFT, RIGHT), (77).to_bytes(8, "big"))
    assert legacy.marks == {LEFT: 77, RIGHT: 77} and legacy.decided == 77
    fresh = Watermarks.decode((LEFT, RIGHT), None)
    assert fresh.current() is None and fresh.advance() is None
    fresh.set_idle(RIGHT, True)
    fresh.observe(LEFT, 5)
    assert fresh.advance() == 5  # the idle input is left out
    fresh.set_idle(LEFT, True)
    assert fresh.current() == 5  # every input idle: the largest watermark
