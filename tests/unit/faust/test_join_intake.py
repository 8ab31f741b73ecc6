"""The join's bulk intake from faust's consumer, its range acks and a task's inbox.

Fakes stand for faust's consumer and app (only the attributes the intake reads);
nothing here talks to a broker: the same paths run against real workers and a
real broker in ``tests/integration/test_join_workers.py``.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from aiokafka.structs import TopicPartition
from faust.types import TP

from streamjoin.ads.policy import AdAttribution
from streamjoin.faust.join.intake import Intake
from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.join.types import LEFT, RIGHT, Fetched
from streamjoin.faust.kafka.consumer import ack_range


class _Topics:
    def __init__(self, readers: dict[str, int]) -> None:
        self._topic_name_index = {t: set(range(n)) for t, n in readers.items()}

    def acks_enabled_for(self, topic: str) -> bool:
        return True


class _App:
    def __init__(self, readers: dict[str, int]) -> None:
        self.topics = _Topics(readers)
        self.consumer = _Consumer(self)
        self.consumer_generation_id = 1


class _Consumer:
    def __init__(self, app: _App) -> None:
        self.app = app
        self.flow_active = True
        self.should_stop = False
        self._committed_offset: dict[Any, int | None] = defaultdict(lambda: None)
        self._acked: dict[Any, list[int]] = defaultdict(list)
        self._acked_index: dict[Any, set[int]] = defaultdict(set)
        self._n_acked = 0
        self._waiting_for_ack = None
        self._read_offset: dict[Any, int | None] = defaultdict(lambda: None)
        self.sought: list[tuple[Any, int]] = []
        #: partitions given up in a cooperative rebalance (no longer assigned)
        self.given_up: set[Any] = set()
        #: faust's live set (what the next fetch asks for) and its paused partitions
        self._active_partitions = {TP(t, p) for t in ("imps", "clicks") for p in range(2)}
        self._paused_partitions: set[Any] = set()

    def assignment(self) -> Any:
        return _Assigned(self.given_up)

    def _get_active_partitions(self) -> set[Any]:
        return self._active_partitions

    async def seek(self, tp: Any, offset: int) -> None:
        self.sought.append((tp, offset))
        self._read_offset[tp] = offset

    async def _getmany(self, active_partitions: Any, timeout: float) -> Any:
        return {}


class _Assigned:
    """Every partition but those given up."""

    def __init__(self, given_up: set[Any]) -> None:
        self.given_up = given_up

    def __contains__(self, tp: Any) -> bool:
        return tp not in self.given_up

    def __iter__(self) -> Any:
        everything = {TP(t, p) for t in ("imps", "clicks") for p in range(2)}
        return iter(sorted(everything - self.given_up))


def _records(topic: str, partition: int, offsets: range) -> list[Fetched]:
    return [Fetched(topic, partition, o, b"k", b"{}", 0) for o in offsets]


def _intake(
    app: _App,
    got: list[tuple[str, int, int]],
    accepting: bool = True,
    inboxes: dict[TP, int] | None = None,
) -> Intake:
    """An intake on *app*; with *inboxes* (input partition -> records waiting),
    what it receives waits there (high water 10)."""
    topic_of = {LEFT: "imps", RIGHT: "clicks"}

    def receive(topic: str, partition: int, records: Any) -> None:
        got.append((topic, partition, len(records)))
        if inboxes is not None:
            tp = TP(topic, partition)
            inboxes[tp] = inboxes.get(tp, 0) + len(records)

    intake = Intake(
        app,
        {"imps": LEFT, "clicks": RIGHT},
        receive,
        high_water=10_000 if inboxes is None else 10,
        waiting=lambda side, p: 0 if inboxes is None else inboxes.get(TP(topic_of[side], p), 0),
        accepting=lambda: accepting,
    )
    intake.install()
    return intake


def test_the_join_takes_its_active_partitions_and_seeks_back_to_a_paused_one() -> None:
    app = _App({"imps": 1, "clicks": 1, "other": 1})
    got: list[tuple[str, int, int]] = []
    intake = _intake(app, got)
    fetch = {
        TP("imps", 0): _records("imps", 0, range(5)),
        TP("clicks", 1): _records("clicks", 1, range(3)),
        TP("clicks", 2): _records("clicks", 2, range(7, 9)),  # paused meanwhile
        TP("other", 0): _records("other", 0, range(4)),
    }
    active = {TP("imps", 0), TP("clicks", 1), TP("other", 0)}
    asyncio.run(intake.take(app.consumer, fetch, active))
    assert got == [("clicks", 1, 3), ("imps", 0, 5)]
    # faust's path gets only what the join does not read; what the join could
    # not take is read again from its first offset
    assert set(fetch) == {TP("other", 0)}
    assert app.consumer.sought == [(TP("clicks", 2), 7)] and intake.sought_back == 1
    # faust's read offsets follow what was taken (no gap for faust to fill)
    assert app.consumer._read_offset[TP("imps", 0)] == 4
    assert app.consumer._read_offset[TP("clicks", 1)] == 2


def test_records_of_a_partition_given_up_meanwhile_are_dropped_not_sought_back() -> None:
    """A cooperative rebalance gave clicks[2] up while a fetch was in flight: its
    records are neither taken nor sought back (the partition is no longer
    assigned; its next owner reads them from the committed offset)."""
    app = _App({"imps": 1, "clicks": 1})
    app.consumer.given_up = {TP("clicks", 2)}
    got: list[tuple[str, int, int]] = []
    intake = _intake(app, got)
    fetch = {
        TP("imps", 0): _records("imps", 0, range(5)),
        TP("clicks", 2): _records("clicks", 2, range(7, 9)),
    }
    asyncio.run(intake.take(app.consumer, fetch, {TP("imps", 0)}))
    assert got == [("imps", 0, 5)]
    assert app.consumer.sought == [] and intake.sought_back == 0
    assert set(fetch) == set()


def test_a_partition_faust_paused_for_a_full_stream_buffer_is_still_taken() -> None:
    """faust takes a partition out of the active ones while a reader's stream
    buffer is full and still delivers its fetched records: so does the join
    (seeking it back there would read it again for ever while the buffer stays
    full)."""
    app = _App({"imps": 2, "clicks": 1})
    app.consumer._buffered_partitions = {TP("imps", 0)}
    got: list[tuple[str, int, int]] = []
    intake = _intake(app, got)
    fetch = {TP("imps", 0): _records("imps", 0, range(4))}
    asyncio.run(intake.take(app.consumer, fetch, set()))
    assert got == [("imps", 0, 4)] and app.consumer.sought == []


def test_records_of_a_fetch_that_outlived_a_rebalance_are_taken() -> None:
    """aiokafka returns them at the positions of the new assignment; faust would
    deliver them, so the join takes them (left to faust they were lost)."""
    app = _App({"imps": 1, "clicks": 1})
    got: list[tuple[str, int, int]] = []
    intake = _intake(app, got)
    original = app.consumer._getmany

    async def rebalanced_meanwhile(active_partitions: Any, timeout: float) -> Any:
        await original(active_partitions, timeout)
        app.consumer_generation_id += 1
        return {TP("imps", 0): _records("imps", 0, range(3))}

    app.consumer._getmany = rebalanced_meanwhile
    intake.installed_on = None
    intake.install()
    fetch = asyncio.run(app.consumer._getmany(None, 1.0))
    assert got == [("imps", 0, 3)] and fetch == {}


def test_a_topic_another_agent_reads_is_copied_and_acked_through_faust_events() -> None:
    """The join gets the records of a shared topic from the fetch too, faust
    still delivers them to every reader; the events the join's agent gets are
    acked only once the join applied their offsets."""
    app = _App({"imps": 2, "clicks": 1})
    got: list[tuple[str, int, int]] = []
    intake = _intake(app, got)
    fetch = {TP("imps", 0): _records("imps", 0, range(5))}
    asyncio.run(intake.take(app.consumer, fetch, None))
    assert got == [("imps", 0, 5)] and TP("imps", 0) in fetch
    events = [_Event() for _ in range(5)]
    for offset, event in enumerate(events[:3]):
        intake.hold(TP("imps", 0), offset, event)
    intake.ack(LEFT, 0, 0, 1)  # offsets 0 and 1 applied, durably
    assert [e.acked for e in events] == [True, True, False, False, False]
    # never acked by range: faust acks a shared record when every reader has
    assert app.consumer._acked[TP("imps", 0)] == []
    intake.hold(TP("imps", 0), 1, events[3])  # delivered late: applied already
    assert events[3].acked
    intake.reset()  # revoked: what is held is read again, never acked
    intake.ack(LEFT, 0, 2, 4)
    assert not events[2].acked


class _Event:
    def __init__(self) -> None:
        self.acked = False

    def ack(self) -> None:
        self.acked = True


def test_records_fetched_while_revoking_are_read_again_not_left_to_faust() -> None:
    app = _App({"imps": 1, "clicks": 1})
    got: list[tuple[str, int, int]] = []
    intake = _intake(app, got, accepting=False)
    fetch = {TP("imps", 0): _records("imps", 0, range(3, 8))}
    asyncio.run(intake.take(app.consumer, fetch, None))
    assert got == [] and fetch == {}
    assert app.consumer.sought == [(TP("imps", 0), 3)]


def test_nothing_is_taken_while_faust_stops_the_flow() -> None:
    app = _App({"imps": 1, "clicks": 1})
    got: list[tuple[str, int, int]] = []
    intake = _intake(app, got)
    app.consumer.flow_active = False
    fetch = {TP("imps", 0): _records("imps", 0, range(5))}
    asyncio.run(intake.take(app.consumer, fetch, None))
    assert got == [] and TP("imps", 0) in fetch


def test_ack_range_does_what_faust_acks_would_per_offset() -> None:
    app = _App({"imps": 1})
    consumer = app.consumer
    tp = TP("imps", 0)
    consumer._committed_offset[tp] = 10
    assert ack_range(consumer, tp, 5, 14) == 5  # below the committed offset: left out
    assert ack_range(consumer, tp, 12, 16) == 2  # 12..14 were acked already
    assert consumer._acked[tp] == [10, 11, 12, 13, 14, 15, 16]
    assert consumer._acked_index[tp] == set(range(10, 17))
    assert consumer._n_acked == 7
    assert ack_range(consumer, tp, 20, 19) == 0


def _task() -> JoinTask:
    return JoinTask(0, AdAttribution(), max_idle_ms=100)


def test_a_batch_takes_at_most_its_limit_and_the_rest_stays_in_order() -> None:
    task = _task()
    task.receive(LEFT, _records("imps", 0, range(0, 6)), 0)
    task.receive(RIGHT, _records("clicks", 0, range(0, 3)), 0)
    first = task.take_inbox(4)
    assert [(side, [r.offset for r in rs]) for side, rs in first] == [(LEFT, [0, 1, 2, 3])]
    assert task.waiting == 5
    rest = task.take_inbox()
    assert [(side, [r.offset for r in rs]) for side, rs in rest] == [
        (LEFT, [4, 5]),
        (RIGHT, [0, 1, 2]),
    ]
    assert task.waiting == 0


def _stamped(topic: str, offsets: range, step_ms: int) -> list[Fetched]:
    return [Fetched(topic, 0, o, b"k", b"{}", i * step_ms) for i, o in enumerate(offsets)]


def test_an_input_far_ahead_in_time_waits_while_the_other_has_records_to_read() -> None:
    """Ten minutes of clicks received with four seconds of impressions: a batch
    takes the clicks up to the lead past the impressions taken, the rest wait
    in the inbox (not a limit: no batch at once for them), until the
    impressions have nothing left to read."""
    task = _task()
    topics = {LEFT: "imps", RIGHT: "clicks"}
    task.receive(RIGHT, _stamped("clicks", range(10), 60_000), 0)
    task.receive(LEFT, _stamped("imps", range(5), 1_000), 0)
    consumer = _HighWater({"imps": 1_000, "clicks": 10})  # 995 impressions to read

    def batch() -> list[tuple[str, list[int]]]:
        waits = task.waits(consumer, topics, 10_000)
        return [(side, [r.offset for r in rs]) for side, rs in task.take_inbox(2_000, waits)]

    # no impression taken yet: the clicks wait for the first ones
    assert batch() == [(LEFT, [0, 1, 2, 3, 4])]
    assert task.waits(consumer, topics, 10_000) == {RIGHT: 14_000}
    assert batch() == [(RIGHT, [0])]
    assert not task.more and task.waiting_on(RIGHT) == 9
    # more impressions, half a minute past: one more click goes, a batch later
    task.receive(LEFT, [Fetched("imps", 0, 5, b"k", b"{}", 55_000)], 0)
    assert batch() == [(LEFT, [5])]
    assert batch() == [(RIGHT, [1])]
    # the impressions caught up: nothing waits for them
    assert task.waits(_HighWater({"imps": 6, "clicks": 10}), topics, 10_000) == {}


def test_an_input_with_records_still_in_the_inbox_is_not_idle() -> None:
    task = _task()
    task.receive(LEFT, _records("imps", 0, range(0, 6)), 0)
    task.next_seen[RIGHT] = 0
    consumer = _HighWater({"imps": 6, "clicks": 0})
    task.take_inbox(2)  # 4 impressions left for the next batch
    # long after the last record was received, both caught up with the fetch
    assert task.going_idle(10_000, consumer, {LEFT: "imps", RIGHT: "clicks"}) == [RIGHT]
    task.take_inbox()
    # its silence starts again after those records
    assert LEFT not in task.going_idle(10_050, consumer, {LEFT: "imps", RIGHT: "clicks"})
    assert task.going_idle(10_100, consumer, {LEFT: "imps", RIGHT: "clicks"}) == [LEFT, RIGHT]


def test_an_idle_input_whose_partition_grew_is_active_again(tmp_path: Path) -> None:
    """Idle means caught up: records the consumer knows of and the task has not
    received make the input active again, so decisions wait for them."""
    from rocksdict import Rdict

    task = _task()
    db = Rdict(str(tmp_path / "task-0"))
    task.open(db, 0)
    topics = {LEFT: "imps", RIGHT: "clicks"}
    task.next_seen[LEFT] = task.next_seen[RIGHT] = 0
    consumer = _HighWater({"imps": 0, "clicks": 0})
    idle = task.going_idle(1_000, consumer, topics)
    assert idle == [LEFT, RIGHT]
    for side in idle:
        task.idle.add(side)
        task.logic.set_idle(side, True)
    consumer.ends["imps"] = 5  # impressions written, not fetched by the join yet
    assert task.going_idle(1_050, consumer, topics) == []
    assert task.idle == {RIGHT}
    assert task.logic.logic.marks.idle == {RIGHT}  # type: ignore[union-attr]
    # caught up again and silent for max_idle_ms: idle again
    task.next_seen[LEFT] = 5
    assert task.going_idle(1_100, consumer, topics) == []
    assert task.going_idle(1_150, consumer, topics) == [LEFT]
    db.close()


class _HighWater:
    """faust's consumer as the join reads it: high watermarks, and (through its
    consumer thread's aiokafka consumer) when a fetch last answered for a
    partition, by default just now."""

    def __init__(self, ends: dict[str, int]) -> None:
        self.ends = ends
        #: topic -> wall ms of the latest fetch response (absent: now)
        self.fetched: dict[str, float] = {}
        self._thread = self
        self._consumer = self

    def highwater(self, tp: TP) -> int:
        return self.ends[tp.topic]

    def last_poll_timestamp(self, tp: Any) -> float:
        import time

        return self.fetched.get(tp.topic, time.time() * 1000)


def test_an_input_is_not_idle_on_a_high_watermark_no_recent_fetch_confirmed() -> None:
    """A frozen process, a starved fetcher or a stalled connection leaves the
    consumer's high watermark stale: the broker may hold records it does not
    know of. Idleness needs a fetch answered since the input went silent."""
    import time

    task = _task()  # max_idle_ms 100
    task.next_seen[LEFT] = task.next_seen[RIGHT] = 0
    consumer = _HighWater({"imps": 0, "clicks": 0})
    topics = {LEFT: "imps", RIGHT: "clicks"}
    now = time.monotonic() * 1000
    task.last_record_ms = {LEFT: int(now) - 5_000, RIGHT: int(now) - 5_000}
    # the latest fetch answered 10 s ago (wall time): before the silence began
    consumer.fetched = {"imps": time.time() * 1000 - 10_000, "clicks": time.time() * 1000}
    assert task.going_idle(int(now), consumer, topics) == [RIGHT]
    # a fetch answered now: the input is caught up and silent, idle
    consumer.fetched = {}
    assert task.going_idle(int(now), consumer, topics) == [LEFT, RIGHT]
    task.idle.update((LEFT, RIGHT))
    # no fetch answered for either within max_idle_ms: both active again, none idle
    consumer.fetched = {"imps": time.time() * 1000 - 1_000, "clicks": time.time() * 1000 - 1_000}
    assert task.going_idle(int(now), consumer, topics) == []
    assert task.idle == set()


@pytest.mark.parametrize(
    ("setter", "name", "default", "ours", "more"),
    [
        # faust's fetch wait; the join's 50 ms, never lengthened
        ("shorten_fetch_wait", "_fetch_max_wait_ms", 1500, 50, 200),
        # faust's 1 MiB per partition; an app that asked for less keeps it
        ("shorten_partition_fetch", "_max_partition_fetch_bytes", 1024**2, 256 * 1024, 512 * 1024),
        # aiokafka's 50 MiB per response; the join's 1 MiB
        ("shorten_fetch_response", "_fetch_max_bytes", 50 * 1024**2, 1024**2, 2 * 1024**2),
    ],
)
def test_a_fetcher_setting_is_lowered_never_raised(
    setter: str, name: str, default: int, ours: int, more: int
) -> None:
    from types import SimpleNamespace

    from streamjoin.faust.kafka import consumer as seam

    lower = getattr(seam, setter)
    fetcher = SimpleNamespace(**{name: default})
    consumer = SimpleNamespace(_thread=SimpleNamespace(_consumer=SimpleNamespace(_fetcher=fetcher)))
    assert lower(consumer, ours) and getattr(fetcher, name) == ours
    assert not lower(consumer, more) and getattr(fetcher, name) == ours
    assert not lower(SimpleNamespace(), ours)  # not faust's aiokafka driver


def test_the_join_asks_four_partitions_worth_per_fetch_response() -> None:
    from streamjoin.faust.join.intake import FETCH_PARTITION_BYTES, FETCH_RESPONSE_BYTES

    assert FETCH_RESPONSE_BYTES == 4 * FETCH_PARTITION_BYTES == 1024**2


def test_the_intake_acks_a_side_by_its_topic() -> None:
    app = _App({"imps": 1, "clicks": 1})
    intake = _intake(app, [])
    intake.ack(RIGHT, 2, 3, 5)
    assert app.consumer._acked[TP("clicks", 2)] == [3, 4, 5]


def test_traffic_starting_on_one_input_gives_the_other_max_idle_ms_to_show_up(
    tmp_path: Path,
) -> None:
    """Both inputs idle (nothing written yet); clicks reach the broker a moment
    before their impressions: the clicks' first records make the idle
    impressions active again, so nothing is decided on clicks alone before the
    impressions had max_idle_ms to arrive."""
    from rocksdict import Rdict

    task = _task()  # max_idle_ms=100
    db = Rdict(str(tmp_path / "task-0"))
    task.open(db, 0)
    topics = {LEFT: "imps", RIGHT: "clicks"}
    consumer = _HighWater({"imps": 0, "clicks": 0})
    for side in task.going_idle(1_000, consumer, topics):
        task.idle.add(side)
        task.logic.set_idle(side, True)  # type: ignore[union-attr]
    assert task.idle == {LEFT, RIGHT}
    consumer.ends["clicks"] = 3  # clicks written, impressions not yet
    task.receive(RIGHT, _records("clicks", 0, range(3)), 1_010)
    assert task.idle == set()  # the impressions are not idle any more
    task.take_inbox()
    # caught up per the broker, but silent only since the clicks came
    assert task.going_idle(1_050, consumer, topics) == []
    assert task.going_idle(1_110, consumer, topics) == [LEFT, RIGHT]
    # clicks again after max_idle_ms of silence: traffic starting again, too
    consumer.ends["clicks"] = 9
    task.receive(RIGHT, _records("clicks", 0, range(3, 5)), 1_120)
    task.receive(RIGHT, _records("clicks", 0, range(5, 7)), 1_170)
    task.take_inbox()
    assert task.going_idle(1_170, consumer, topics) == []
    # a steady stream on one input does not keep the other from going idle
    assert task.going_idle(1_220, consumer, topics) == [LEFT]
    task.idle.add(LEFT)
    task.receive(RIGHT, _records("clicks", 0, range(7, 9)), 1_230)
    assert task.idle == {LEFT}
    db.close()


def _ad_records(topic: str, offsets: range, docs: list[dict[str, Any]]) -> list[Fetched]:
    """Records of the ad example (key: the auction) at *offsets*."""
    import json

    return [
        Fetched(topic, 0, o, doc["auction_id"].encode(), json.dumps(doc).encode(), doc["ts_ms"])
        for o, doc in zip(offsets, docs, strict=True)
    ]


def test_traffic_resuming_after_a_stall_gives_the_other_input_max_idle_ms_to_show_up(
    tmp_path: Path,
) -> None:
    """The network stalls for longer than max_idle_ms (no fetch answered, the
    producer's records held up too), then heals: the first fetch brings the
    impressions produced during the stall, while the clicks produced with them
    reach the broker a moment later. Neither input was found idle during the
    stall (no fetch could tell); the impressions resuming after a silence of
    max_idle_ms is traffic starting again, so the clicks, caught up per that
    first fetch, are not idle before they had max_idle_ms to show up, and none
    of them is late once they come (the connection-faults run lost clicks so)."""
    import time

    from rocksdict import Rdict

    from streamjoin.faust.join.router import RecordRouter
    from streamjoin.faust.join.stats import JoinStats

    base = 1_767_225_600_000  # event time (ms)
    policy = AdAttribution()  # grace 10 s
    outputs = {name: f"out-{name}" for name in policy.outputs}
    router = RecordRouter("billing", policy, JoinStats(), outputs, "dead")
    task = JoinTask(0, policy, max_idle_ms=2_000)
    db = Rdict(str(tmp_path / "task-0"))
    t = int(time.monotonic() * 1000) - 60_000  # the run's start on the monotonic clock
    task.open(db, t)
    topics = {LEFT: "imps", RIGHT: "clicks"}
    consumer = _HighWater({"imps": 0, "clicks": 0})

    def fetched_at(mono_ms: int) -> None:
        """A fetch answered for both inputs at *mono_ms* (aiokafka stamps wall time)."""
        wall = time.time() * 1000 - (time.monotonic() * 1000 - mono_ms)
        consumer.fetched = {"imps": wall, "clicks": wall}

    def impression(i: int) -> dict[str, Any]:
        ts = base + i * 2_000
        return {"auction_id": f"a{i}", "impression_id": f"i{i}", "campaign": "c", "cost": 0.5,
                "ts_ms": ts}  # fmt: skip

    def click(i: int) -> dict[str, Any]:
        return {"auction_id": f"a{i}", "click_id": f"k{i}", "ts_ms": base + i * 2_000 + 500}

    def batch(now: int) -> list[Any]:
        received = task.take_inbox()
        return router.stage(task, received, task.going_idle(now, consumer, topics))

    # steady traffic: an impression every 100 ms of wall time (2 s of event
    # time: the generator runs 20x), a click on every other auction
    for i in range(10):
        t += 100
        consumer.ends["imps"] = i + 1
        task.receive(LEFT, _ad_records("imps", range(i, i + 1), [impression(i)]), t)
        if i % 2 == 0:
            n = consumer.ends["clicks"]
            consumer.ends["clicks"] = n + 1
            task.receive(RIGHT, _ad_records("clicks", range(n, n + 1), [click(i)]), t)
        fetched_at(t)
        batch(t)
    assert task.idle == set()
    # the stall: 5 s without a fetch answered or a record produced; then the
    # first fetch brings the impressions produced meanwhile (100 s of event
    # time) and says the clicks are caught up: theirs are not on the broker yet
    t += 5_000
    consumer.ends["imps"] = 60
    fetched_at(t)
    stalled = [impression(i) for i in range(10, 60)]
    task.receive(LEFT, _ad_records("imps", range(10, 60), stalled), t)
    out = batch(t + 10)
    # the clicks of the stall reach the broker a moment later
    consumer.ends["clicks"] = 30
    fetched_at(t + 60)
    held = [click(i) for i in range(10, 60, 2)]
    task.receive(RIGHT, _ad_records("clicks", range(5, 30), held), t + 60)
    out += batch(t + 70)
    late = [headers for topic, _, _, headers in out if topic == "dead"]
    assert late == [], f"{len(late)} of the stall's 25 clicks dead-lettered, e.g. {late[0]}"
    assert router.stats.late == 0
    db.close()


def test_an_input_partition_with_a_full_inbox_is_not_fetched_the_others_are() -> None:
    """Task 0 has the high water of impressions waiting: that partition leaves
    the live set (the next fetches do not ask for it) while task 1's and task
    0's clicks stay, and the fetch does not wait: no other task's records, nor
    the other input of the same task (which an input waiting in time for it
    needs, see alignment), are held up behind that backlog."""
    app = _App({"imps": 1, "clicks": 1})
    got: list[tuple[str, int, int]] = []
    inboxes: dict[TP, int] = {}
    intake = _intake(app, got, inboxes=inboxes)
    fetch = {  # (aiokafka's partitions in a fetch; faust's held)
        TopicPartition("imps", 0): _records("imps", 0, range(12)),
        TopicPartition("clicks", 1): _records("clicks", 1, range(3)),
    }
    asyncio.run(asyncio.wait_for(intake.take(app.consumer, fetch, None), 1.0))
    assert got == [("clicks", 1, 3), ("imps", 0, 12)]
    assert intake.holding == {TP("imps", 0)} and intake.holds == 1
    assert all(type(tp) is TP for tp in intake.holding)
    assert app.consumer._active_partitions == {TP("imps", 1), TP("clicks", 0), TP("clicks", 1)}
    # a fetch under way when the partition was held: its records are taken
    late = {TP("imps", 0): _records("imps", 0, range(12, 14))}
    asyncio.run(
        asyncio.wait_for(intake.take(app.consumer, late, app.consumer._active_partitions), 1.0)
    )
    assert got[-1] == ("imps", 0, 2) and app.consumer.sought == []
    # a batch took the inbox below the high water: fetched again
    inboxes[TP("imps", 0)] = 9
    intake.drained()
    assert not intake.holding
    assert app.consumer._active_partitions == {TP(t, p) for t in ("imps", "clicks") for p in (0, 1)}


def test_a_held_partition_paused_or_given_up_meanwhile_is_not_fetched_again() -> None:
    app = _App({"imps": 1, "clicks": 1})
    inboxes: dict[TP, int] = {}
    intake = _intake(app, [], inboxes=inboxes)
    full = {TP(t, 0): _records(t, 0, range(10)) for t in ("imps", "clicks")}
    asyncio.run(intake.take(app.consumer, full, None))
    assert intake.holding == {TP("imps", 0), TP("clicks", 0)}
    app.consumer._paused_partitions = {TP("imps", 0)}  # a restore paused it
    app.consumer.given_up = {TP("clicks", 0)}
    inboxes.clear()
    intake.drained()
    assert not intake.holding
    assert app.consumer._active_partitions == {TP("imps", 1), TP("clicks", 1)}


def _waits_until_drained(
    intake: Intake, app: _App, fetch: Any, inboxes: dict[TP, int], drained: list[TP]
) -> bool:
    """Take *fetch*: whether the fetch was still waiting 50 ms later; then a batch
    empties the inboxes of *drained*, and the fetch must end within a second."""

    async def scenario() -> bool:
        waiting = asyncio.ensure_future(intake.take(app.consumer, fetch, None))
        await asyncio.sleep(0.05)
        was_waiting = not waiting.done()
        for tp in drained:
            inboxes[tp] = 0
        intake.drained()
        await asyncio.wait_for(waiting, 1.0)
        return was_waiting

    return asyncio.run(scenario())


def test_the_fetch_waits_only_when_every_partition_is_held() -> None:
    """With every partition of the join held nothing is left to fetch: the fetch
    waits for a batch to make room (instead of faust's one-second sleep on an
    empty live set), and goes on once one does."""
    app = _App({"imps": 1, "clicks": 1})
    inboxes: dict[TP, int] = {}
    intake = _intake(app, [], inboxes=inboxes)
    # three partitions full: the fourth is still fetched, the fetch goes on
    three = [TP("imps", 0), TP("imps", 1), TP("clicks", 0)]
    fetch = {tp: _records(tp.topic, tp.partition, range(10)) for tp in three}
    assert not _waits_until_drained(intake, app, fetch, inboxes, [])
    fetch = {TP("clicks", 1): _records("clicks", 1, range(10))}
    assert _waits_until_drained(intake, app, fetch, inboxes, [TP("imps", 1)])
    assert intake.holding == {TP("imps", 0), TP("clicks", 0), TP("clicks", 1)}


def test_a_rebalance_fetches_every_held_partition_again() -> None:
    app = _App({"imps": 1, "clicks": 1})
    intake = _intake(app, [], inboxes={})
    asyncio.run(
        intake.take(app.consumer, {TP("clicks", 1): _records("clicks", 1, range(10))}, None)
    )
    assert intake.holding == {TP("clicks", 1)}
    intake.reset({1})  # revoked
    assert not intake.holding and TP("clicks", 1) in app.consumer._active_partitions
    asyncio.run(
        intake.take(app.consumer, {TP("clicks", 0): _records("clicks", 0, range(10))}, None)
    )
    intake.install()  # the next assignment
    assert not intake.holding and TP("clicks", 0) in app.consumer._active_partitions


def test_the_fetch_waits_when_the_tasks_not_held_are_paused_for_a_restore() -> None:
    """Task 1 is being restored (paused: out of the live set) when task 0 is
    held: nothing of the join is left to fetch, so the fetch waits for a batch
    instead of letting faust ask for an empty live set (it sleeps a second)."""
    app = _App({"imps": 1, "clicks": 1})
    paused = {TP("imps", 1), TP("clicks", 1)}
    app.consumer._active_partitions -= paused
    app.consumer._paused_partitions = set(paused)
    inboxes: dict[TP, int] = {}
    intake = _intake(app, [], inboxes=inboxes)
    fetch = {TP(t, 0): _records(t, 0, range(10)) for t in ("imps", "clicks")}

    assert _waits_until_drained(intake, app, fetch, inboxes, [TP("imps", 0), TP("clicks", 0)])
    assert app.consumer._active_partitions == {TP("imps", 0), TP("clicks", 0)}
