"""Windowed inner/left/outer joins: the stream equals the reference for any arrival within grace."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.join import keys
from streamjoin.join.errors import JoinError
from streamjoin.join.policy import DEAD_LETTER, BadRecord, Emission, Late
from streamjoin.join.state import MemoryState
from streamjoin.join.window import JoinWindow
from streamjoin.join.windowed import (
    JOINED,
    JoinKind,
    JoinRecord,
    JoinResult,
    Side,
    TaskWindowedJoin,
    WindowedJoinPolicy,
    closes_after,
    content_rid,
    windowed_join,
)
from streamjoin.join.windowed_task import CLOSE

Ids = tuple[str | None, str | None]
Fed = tuple[Side, JoinRecord]
KINDS = list(JoinKind)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[JoinWindow, list[JoinRecord], list[JoinRecord]]:
    window = JoinWindow(
        before=draw(st.integers(0, 30)),
        after=draw(st.integers(0, 30)),
        grace=draw(st.integers(0, 20)),
    )
    keys = [f"k{i}" for i in range(draw(st.integers(1, 3)))]
    lefts = [
        JoinRecord(draw(st.sampled_from(keys)), f"l{n}", draw(st.integers(0, 200)), b"L%d" % n)
        for n in range(draw(st.integers(0, 8)))
    ]
    rights = [
        JoinRecord(draw(st.sampled_from(keys)), f"r{n}", draw(st.integers(0, 200)), b"R%d" % n)
        for n in range(draw(st.integers(0, 10)))
    ]
    return window, lefts, rights


def _arrival(
    window: JoinWindow, lefts: list[JoinRecord], rights: list[JoinRecord], rnd: random.Random
) -> list[Fed]:
    """An arrival order within grace: arrival = event time + a jitter of at most grace."""
    fed = [(Side.LEFT, r) for r in lefts] + [(Side.RIGHT, r) for r in rights]
    return sorted(fed, key=lambda f: (f[1].ts + rnd.randint(0, window.grace), rnd.random()))


def _feed(task: TaskWindowedJoin, side: Side, record: JoinRecord) -> list[JoinResult | Late]:
    return task.on_left(record) if side is Side.LEFT else task.on_right(record)


def _check_unmatched_bound(task: TaskWindowedJoin, result: JoinResult) -> None:
    """An unmatched result leaves only once no on-time record can pair with it."""
    window = task.window
    now = task.decision_time
    assert now is not None
    if result.right is None:
        assert result.left is not None
        assert now > result.left.ts + window.after + window.grace, (result, now)
    if result.left is None:
        assert result.right is not None
        assert now > result.right.ts + window.before + window.grace, (result, now)


class Collector:
    """Every emission of a run, checked as it comes."""

    def __init__(self) -> None:
        self.results: dict[Ids, set[JoinResult]] = {}
        self.count: Counter[Ids] = Counter()
        self.late: list[Late] = []

    def add(self, task: TaskWindowedJoin, items: list[JoinResult | Late]) -> None:
        for item in items:
            if isinstance(item, Late):
                self.late.append(item)
                continue
            if item.left is None or item.right is None:
                _check_unmatched_bound(task, item)
            self.results.setdefault(item.ids, set()).add(item)
            self.count[item.ids] += 1

    def single(self) -> dict[Ids, JoinResult]:
        """Each result id with its one value (fails if an id had two values)."""
        assert {i: len(v) for i, v in self.results.items() if len(v) != 1} == {}
        return {i: next(iter(v)) for i, v in self.results.items()}


def _reference(
    kind: JoinKind, window: JoinWindow, lefts: list[JoinRecord], rights: list[JoinRecord]
) -> dict[Ids, JoinResult]:
    return {r.ids: r for r in windowed_join(kind, window, lefts, rights)}


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_every_kind_equals_the_reference_for_any_arrival_within_grace(
    scenario: tuple[JoinWindow, list[JoinRecord], list[JoinRecord]], rnd: random.Random
) -> None:
    window, lefts, rights = scenario
    order = _arrival(window, lefts, rights, rnd)
    for kind in KINDS:
        task = TaskWindowedJoin(kind, window)
        got = Collector()
        for side, record in order:
            got.add(task, _feed(task, side, record))
        got.add(task, task.flush())
        assert got.late == []
        assert dict(got.count) == dict.fromkeys(got.count, 1), "a result was emitted twice"
        assert got.single() == _reference(kind, window, lefts, rights), kind
        assert task.stored() == 0


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False), st.sampled_from(KINDS))
def test_late_records_are_reported_and_never_joined(
    scenario: tuple[JoinWindow, list[JoinRecord], list[JoinRecord]],
    rnd: random.Random,
    kind: JoinKind,
) -> None:
    window, lefts, rights = scenario
    keys = sorted({r.key for r in [*lefts, *rights]}) or ["k0"]
    task = TaskWindowedJoin(kind, window)
    got = Collector()
    injected = 0
    for side, record in _arrival(window, lefts, rights, rnd):
        got.add(task, _feed(task, side, record))
        now = task.decision_time
        if now is not None and now - window.grace > 0 and rnd.random() < 0.5:
            late_side = rnd.choice(list(Side))
            late = JoinRecord(
                rnd.choice(keys), f"late{injected}", rnd.randint(0, now - window.grace - 1), b"x"
            )
            injected += 1
            assert _feed(task, late_side, late) == [Late(late, late_side, now)]
            assert task.decision_time == now
    got.add(task, task.flush())
    assert task.late_count == injected
    assert got.single() == _reference(kind, window, lefts, rights)


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False), st.sampled_from(KINDS))
def test_feeding_a_record_again_never_emits_a_second_copy(
    scenario: tuple[JoinWindow, list[JoinRecord], list[JoinRecord]],
    rnd: random.Random,
    kind: JoinKind,
) -> None:
    window, lefts, rights = scenario
    order = _arrival(window, lefts, rights, rnd)
    # a second copy of some records, each some time after the first
    copies = [
        (rnd.randint(i + 1, len(order)), f) for i, f in enumerate(order) if rnd.random() < 0.5
    ]
    task = TaskWindowedJoin(kind, window)
    got = Collector()
    for position in range(len(order) + 1):
        for at, (side, record) in copies:
            if at == position:
                items = _feed(task, side, record)
                assert all(isinstance(i, Late) for i in items), items
        if position < len(order):
            got.add(task, _feed(task, *order[position]))
    got.add(task, task.flush())
    assert dict(got.count) == dict.fromkeys(got.count, 1)
    assert got.single() == _reference(kind, window, lefts, rights)


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False), st.sampled_from(KINDS), st.data())
def test_a_crash_and_replay_yields_the_reference_each_result_with_one_value(
    scenario: tuple[JoinWindow, list[JoinRecord], list[JoinRecord]],
    rnd: random.Random,
    kind: JoinKind,
    draw: st.DataObject,
) -> None:
    """Crash after record k with inputs committed up to c <= k and the changelog
    holding everything before c plus any prefix of what came after (writes are
    flushed before offsets are committed); restore, rebuild, replay from c."""
    window, lefts, rights = scenario
    order = _arrival(window, lefts, rights, rnd)
    first = TaskWindowedJoin(kind, window)
    assert isinstance(first.state, MemoryState)
    first.state.record_changelog = True
    k = draw.draw(st.integers(0, len(order)), label="crash after")
    c = draw.draw(st.integers(0, k), label="committed")
    got = Collector()
    marks = []
    for side, record in order[:k]:
        marks.append(len(first.state.changelog))
        got.add(first, _feed(first, side, record))
    marks.append(len(first.state.changelog))
    assert got.late == []
    cut = draw.draw(st.integers(marks[c], marks[k]), label="changelog prefix")
    second = TaskWindowedJoin(kind, window, MemoryState.from_changelog(first.state.changelog[:cut]))
    second.rebuild_indexes()
    for position in range(c, len(order)):
        side, record = order[position]
        items = _feed(second, side, record)
        # only a record already applied before the crash, whose window has closed since
        late = [i for i in items if isinstance(i, Late)]
        assert late == [] or position < k, (position, k, late)
        got.add(second, [i for i in items if not isinstance(i, Late)])
    got.add(second, second.flush())
    assert got.single() == _reference(kind, window, lefts, rights)
    if cut == marks[k]:  # nothing was lost: replaying applied records emits nothing
        assert dict(got.count) == dict.fromkeys(got.count, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_state_stays_flat_across_many_windows(kind: JoinKind) -> None:
    window = JoinWindow(before=5, after=20, grace=10)
    state = MemoryState()
    task = TaskWindowedJoin(kind, window, state)
    sizes = []
    emitted = 0
    for n in range(4_000):
        ts = n * 7
        emitted += len(task.on_left(JoinRecord(f"a{n % 13}", f"l{n}", ts, b"v")))
        if n % 3:  # some lefts and rights stay unmatched
            emitted += len(task.on_right(JoinRecord(f"a{n % 13}", f"r{n}", ts + 4, b"w")))
        else:
            emitted += len(task.on_right(JoinRecord("orphan", f"r{n}", ts + 4, b"w")))
        if n % 400 == 399:
            sizes.append(len(state))  # every key: records, index, stream time
    assert emitted >= 2_666  # every matching pair at least
    assert max(sizes) - min(sizes) <= 2, sizes
    # after + grace of lefts, before + grace of rights, each with its index entry
    assert max(sizes) < 30, sizes


class _ScanLog(MemoryState):
    """A state that notes where each scan of the close index starts."""

    def __init__(self) -> None:
        super().__init__()
        self.close_scans: list[bytes] = []

    def scan(self, start: bytes, end: bytes) -> list[tuple[bytes, bytes]]:
        if start[:1] == CLOSE:
            self.close_scans.append(start)
        return super().scan(start, end)


def test_closing_windows_scans_the_close_index_from_the_last_decision_time() -> None:
    """A store keeps deleted entries as tombstones (RocksDB until compaction): a
    close that scanned the index from its start walked every window closed
    before, for every record."""
    window = JoinWindow(before=5, after=20, grace=10)
    state = _ScanLog()
    task = TaskWindowedJoin(JoinKind.OUTER, window, state)
    before: int | None = None
    for n in range(300):
        for side, record in (
            (Side.LEFT, JoinRecord(f"a{n % 7}", f"l{n}", n * 7, b"v")),
            (Side.RIGHT, JoinRecord(f"a{n % 5}", f"r{n}", n * 7 + 3, b"w")),
        ):
            scans = len(state.close_scans)
            task.on_left(record) if side is Side.LEFT else task.on_right(record)
            if before is not None:
                # each close starts where the one before ended: the decision time it reached
                assert len(state.close_scans) == scans + 1
                assert state.close_scans[-1] >= CLOSE + keys.ts_bytes(before)
            before = task.decision_time
    assert state.close_scans[-1] > state.close_scans[0]


def test_an_unmatched_left_is_emitted_exactly_after_its_window_closes() -> None:
    window = JoinWindow(before=5, after=10, grace=3)
    assert closes_after(window, Side.LEFT, 100) == 113
    task = TaskWindowedJoin(JoinKind.LEFT, window)
    lone = JoinRecord("a", "l1", 100, b"x")
    assert task.on_left(lone) == []
    # the left input is caught up and silent: decision time follows the right one
    assert task.set_idle("left", True) == []
    assert task.on_right(JoinRecord("b", "r0", 113, b"")) == []  # decision time 113: open
    assert task.decision_time == 113
    # a right record at l.ts + after is still on time at decision time 113, and pairs
    late_partner = JoinRecord("a", "r1", 110, b"y")
    assert task.on_right(late_partner) == [JoinResult(lone, late_partner)]
    other = JoinRecord("a", "l2", 110, b"z")  # on time: 110 + grace >= 113
    assert task.on_left(other) == [JoinResult(other, late_partner)]
    alone = JoinRecord("c", "l3", 111, b"q")
    assert task.on_left(alone) == []
    assert task.decision_time == 113  # decision time never goes back
    assert task.set_idle("left", True) == []
    assert task.on_right(JoinRecord("b", "r2", 114, b"")) == []  # l1 closes, but it paired
    assert task.on_right(JoinRecord("b", "r3", 124, b"")) == []  # l2 closed too, paired
    assert task.on_right(JoinRecord("b", "r4", 125, b"")) == [JoinResult(alone, None)]
    assert task.stored() == 2  # r3 and r4 (kept before + grace = 8 ms); no left is left


def test_an_unmatched_right_is_emitted_exactly_after_its_window_closes() -> None:
    window = JoinWindow(before=5, after=10, grace=3)
    assert closes_after(window, Side.RIGHT, 100) == window.decided_after(100) == 108
    task = TaskWindowedJoin(JoinKind.OUTER, window)
    lone = JoinRecord("a", "r1", 100, b"x")
    assert task.on_right(lone) == []
    assert task.set_idle("right", True) == []
    assert task.on_left(JoinRecord("b", "l0", 108, b"")) == []
    assert task.on_left(JoinRecord("b", "l1", 109, b"")) == [JoinResult(None, lone)]
    # a LEFT join never emits unmatched rights, an INNER join nothing unmatched
    for kind in (JoinKind.LEFT, JoinKind.INNER):
        task = TaskWindowedJoin(kind, window)
        task.on_right(lone)
        assert task.on_right(JoinRecord("b", "r9", 10_000, b"")) == []
        assert task.flush() == []


def test_flush_closes_every_window_and_later_records_are_late() -> None:
    task = TaskWindowedJoin(JoinKind.OUTER, JoinWindow(before=0, after=10, grace=5))
    left, right = JoinRecord("a", "l", 50, b""), JoinRecord("b", "r", 52, b"")
    task.on_left(left)
    task.on_right(right)
    # in closing order: the right one closes after 52 + 0 + 5, the left one after 50 + 10 + 5
    assert task.flush() == [JoinResult(None, right), JoinResult(left, None)]
    assert task.stored() == 0
    again = JoinRecord("a", "r2", 55, b"")
    assert task.on_right(again) == [Late(again, Side.RIGHT, task.decision_time or 0)]


def test_the_reference_is_sorted_and_counts_equal_records_once() -> None:
    window = JoinWindow(before=0, after=5, grace=0)
    left = JoinRecord("a", "l1", 10, b"")
    rights = [JoinRecord("a", "r2", 12, b""), JoinRecord("a", "r1", 14, b"")]
    out = windowed_join(
        JoinKind.OUTER, window, [left, left], [*rights, JoinRecord("a", "r3", 99, b"")]
    )
    assert [r.ids for r in out] == [("l1", "r1"), ("l1", "r2"), (None, "r3")]


def test_records_outside_the_time_range_are_rejected() -> None:
    with pytest.raises(JoinError, match="outside"):
        JoinRecord("a", "x", -1, b"")


# -- the policy -----------------------------------------------------------------

POLICY = WindowedJoinPolicy(JoinKind.LEFT, JoinWindow(before=0, after=100, grace=10))


@pytest.mark.parametrize(
    ("key", "value", "ts", "reason"),
    [
        (None, b"v", 5, "no record key"),
        (b"\xff\xfe", b"v", 5, "not UTF-8"),
        (b"a", None, 5, "tombstone"),
        (b"a", b"v", -1, "negative"),
        (b"a" * 70_000, b"v", 5, "over 65535"),
    ],
)
def test_policy_rejects_records_it_cannot_join(
    key: bytes | None, value: bytes | None, ts: int, reason: str
) -> None:
    for decode in (POLICY.decode_left, POLICY.decode_right):
        with pytest.raises(BadRecord, match=reason) as info:
            decode(key, value, ts)
        assert info.value.reason.startswith(("left: ", "right: "))


def test_policy_custom_decode_and_its_rejections() -> None:
    def decode(key: bytes | None, value: bytes | None, ts: int) -> tuple[str, bytes]:
        doc = json.loads(value or b"{}")
        if "user" not in doc:
            raise BadRecord("missing field 'user'")
        return str(doc["user"]), json.dumps(doc["data"]).encode()

    policy = WindowedJoinPolicy(JoinKind.INNER, JoinWindow(0, 10, 0), decode)
    record = policy.decode_left(None, b'{"user": 7, "data": [1]}', 1_000)
    assert (record.key, record.ts, record.value) == ("7", 1_000, b"[1]")
    assert record.rid == content_rid("7", 1_000, b"[1]")
    with pytest.raises(BadRecord, match="right: missing field 'user'"):
        policy.decode_right(b"k", b"{}", 1_000)


def test_policy_emits_joined_results_dead_letters_and_collapses_identical_records() -> None:
    task = POLICY.task(MemoryState())
    imp = POLICY.decode_left(b"auction-1", b"shown", 1_000)
    same = POLICY.decode_left(b"auction-1", b"shown", 1_000)
    assert same == imp  # identical records on one side are one record
    assert task.on_left(imp) == []
    assert task.on_left(same) == []
    click = POLICY.decode_right(b"auction-1", b"\x00\xffbin", 1_050)
    (joined,) = task.on_right(click)
    assert joined.output == JOINED
    assert joined.key == f"{imp.rid}|{click.rid}".encode()
    assert json.loads(joined.value) == {
        "key": "auction-1",
        "left": {"id": imp.rid, "ts": 1_000, "value": "shown"},
        "right": {"id": click.rid, "ts": 1_050, "value_base64": "AP9iaW4="},
    }
    lone = POLICY.decode_left(b"auction-2", b"alone", 1_060)
    task.on_left(lone)
    assert task.decision_time == 1_050  # the right input's watermark holds it back
    # 1040 is 10 ms behind its own input's 1050: within grace, not late
    task.on_right(POLICY.decode_right(b"auction-9", b"", 1_040))
    assert task.on_right(POLICY.decode_right(b"auction-9", b"", 1_065)) == []
    assert task.decision_time == 1_060
    late = POLICY.decode_right(b"auction-2", b"x", 1_045)
    assert task.on_right(late) == [
        Emission(
            DEAD_LETTER,
            b"auction-2",
            b"late: right record ts_ms 1045 + grace 10 ms is below decision time 1060",
        )
    ]
    # the left input goes idle: decision time follows the right one alone
    assert task.set_idle("left", True) == []
    (unmatched,) = task.on_right(POLICY.decode_right(b"auction-3", b"", 1_171))
    assert unmatched.key == f"{lone.rid}|".encode()
    assert json.loads(unmatched.value)["right"] is None
    assert POLICY.outputs == (JOINED,)
