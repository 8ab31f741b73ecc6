"""Per-partition archive bookkeeping (pure): skip, buffer, plan, commit; crash and replay."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.ads.archive.layout import ArchivedFile, HourBucket, parse_file_name
from streamjoin.ads.archive.ledger import FlushPlan, Offer, PartitionLedger

H0, H1, H2 = HourBucket("2026-01-01", 0), HourBucket("2026-01-01", 1), HourBucket("2026-01-01", 2)


def _row(offset: int) -> dict[str, int]:
    return {"offset": offset}


def test_buffered_records_plan_one_file_per_hour_bucket_in_time_order() -> None:
    ledger: PartitionLedger[str] = PartitionLedger("clicks", 3)
    layout = [(10, H1), (11, H0), (12, H1), (13, None), (14, H0), (15, H1)]
    offers = [
        ledger.offer(o, None if b is None else (b, _row(o)), f"t{o}", now=float(o))
        for o, b in layout
    ]
    assert offers == [Offer.BUFFERED] * 3 + [Offer.REJECTED] + [Offer.BUFFERED] * 2
    assert ledger.buffered == 5 and ledger.pending_buckets() == [H0, H1]
    assert not ledger.due(14.9, 5.0) and ledger.due(15.0, 5.0)
    plan = ledger.plan()
    assert [(f.bucket, f.file) for f in plan.files] == [
        (H0, ArchivedFile("clicks", 3, 11, 14)),
        (H1, ArchivedFile("clicks", 3, 10, 15)),
    ]
    assert [[r["offset"] for r in f.rows] for f in plan.files] == [[11, 14], [10, 12, 15]]
    assert plan.rows == 5 and plan.already_archived == 0
    assert ledger.commit(plan) == ["t10", "t11", "t12", "t14", "t15"]
    assert ledger.buffered == 0 and not ledger.due(100.0, 5.0)
    assert (ledger.highest(H0), ledger.highest(H1), ledger.highest()) == (14, 15, 15)


def test_archiving_a_range_that_is_already_covered_writes_nothing() -> None:
    """A replay of archived offsets is skipped record by record: an empty plan."""
    archived = {H0: 20, H1: 25}
    ledger: PartitionLedger[int] = PartitionLedger("clicks", 0, archived)
    for offset in range(10, 26):
        bucket = H1 if offset > 20 or offset % 2 else H0
        assert ledger.offer(offset, (bucket, _row(offset)), offset) is Offer.ALREADY_ARCHIVED
    assert ledger.plan() == FlushPlan(files=(), already_archived=0)
    # past the archived range of its own hour, a record is new again
    assert ledger.offer(26, (H0, _row(26)), 26) is Offer.BUFFERED
    assert ledger.plan().files[0].file == ArchivedFile("clicks", 0, 26, 26)


def test_files_another_writer_put_in_place_meanwhile_are_left_out() -> None:
    ledger: PartitionLedger[int] = PartitionLedger("clicks", 0)
    for offset in range(5):
        ledger.offer(offset, (H0, _row(offset)), offset)
    plan = ledger.plan(on_disk={H0: 2})
    assert plan.already_archived == 3
    assert [f.file for f in plan.files] == [ArchivedFile("clicks", 0, 3, 4)]
    assert ledger.commit(plan) == [0, 1, 2, 3, 4]  # all of them may be acknowledged


def test_a_replay_of_a_buffered_record_is_held_until_the_original_is_written() -> None:
    ledger: PartitionLedger[str] = PartitionLedger("impressions", 1)
    assert ledger.offer(7, (H2, _row(7)), "a7") is Offer.BUFFERED
    assert ledger.offer(8, None, "a8") is Offer.REJECTED
    assert ledger.offer(9, (H2, _row(9)), "a9") is Offer.BUFFERED
    # the consumer is moved back (a join sharing it seeks): 7..9 come again
    assert ledger.offer(7, (H2, _row(7)), "b7") is Offer.HELD
    assert ledger.offer(8, None, "b8") is Offer.REPLAYED
    assert ledger.offer(9, (H2, _row(9)), "b9") is Offer.HELD
    plan = ledger.plan()
    assert [len(f.rows) for f in plan.files] == [2]
    assert ledger.commit(plan) == ["a7", "a9", "b7", "b9"]
    assert ledger.offer(9, (H2, _row(9)), "c9") is Offer.REPLAYED
    assert ledger.offer(6, (H2, _row(6)), "c6") is Offer.REPLAYED  # before the first seen


def test_buckets_archived_below_the_first_offset_are_forgotten() -> None:
    ledger: PartitionLedger[int] = PartitionLedger("clicks", 0, {H0: 50, H1: 500})
    ledger.offer(100, (H2, _row(100)), 100)
    assert (ledger.highest(H0), ledger.highest(H1)) == (None, 500)


def test_the_expected_offset_follows_the_archive_then_what_was_offered() -> None:
    assert PartitionLedger("clicks", 0).expected() is None  # nothing archived: no gap to see
    ledger: PartitionLedger[int] = PartitionLedger("clicks", 0, {H0: 50, H1: 40})
    assert ledger.expected() == 51  # after the highest offset of any bucket
    ledger.offer(51, None, 51)  # a malformed record still moves it
    assert ledger.expected() == 52
    ledger.offer(60, (H1, _row(60)), 60)
    ledger.offer(55, (H1, _row(55)), 55)  # a replay does not move it back
    assert ledger.expected() == 61


# -- crash and replay, against a model of a faust consumer and a directory ----------


@dataclass
class Disk:
    """Renamed files only, per bucket: what a crash leaves."""

    files: dict[HourBucket, list[tuple[ArchivedFile, tuple[int, ...]]]] = field(
        default_factory=dict
    )

    def highest(self) -> dict[HourBucket, int]:
        out = {}
        for bucket, items in self.files.items():
            names = [f.name for f, _ in items]
            lasts = [parsed.last for parsed in map(parse_file_name, names) if parsed]
            if lasts:
                out[bucket] = max(lasts)
        return out


@dataclass
class Consumer:
    """Commits only the contiguous acknowledged offsets, like faust."""

    committed: int = 0
    position: int = 0
    acked: set[int] = field(default_factory=set)

    def commit(self) -> None:
        while self.committed in self.acked:
            self.committed += 1


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("consume"), st.integers(1, 12)),
        st.tuples(st.just("flush"), st.integers(0, 3)),  # crash after n files (3: none)
        st.tuples(st.just("commit"), st.just(0)),
        st.tuples(st.just("crash"), st.just(0)),
        st.tuples(st.just("seek-back"), st.integers(0, 10)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([H0, H1, H2, None]), min_size=1, max_size=60),
    STEPS,
)
def test_any_crash_and_replay_archives_every_valid_record_exactly_once(
    buckets: list[HourBucket | None], steps: list[tuple[str, int]]
) -> None:
    """Crashes anywhere, even between the files of one flush, and replays from the
    committed offset (or a seek back) never lose or duplicate a row."""
    disk = Disk()
    consumer = Consumer()
    ledger: PartitionLedger[int] = PartitionLedger("t", 0, disk.highest())

    def consume(n: int) -> None:
        for offset in range(consumer.position, min(consumer.position + n, len(buckets))):
            bucket = buckets[offset]
            record = None if bucket is None else (bucket, _row(offset))
            if ledger.offer(offset, record, offset) not in (Offer.BUFFERED, Offer.HELD):
                consumer.acked.add(offset)
            consumer.position = offset + 1

    def flush(crash_after: int) -> bool:
        plan = ledger.plan(disk.highest())
        for n, item in enumerate(plan.files):
            if n == crash_after:
                return False
            offsets = tuple(int(r["offset"]) for r in item.rows)  # type: ignore[arg-type]
            disk.files.setdefault(item.bucket, []).append((item.file, offsets))
        consumer.acked.update(ledger.commit(plan))
        return True

    def crash() -> PartitionLedger[int]:
        consumer.acked = {o for o in consumer.acked if o < consumer.committed}
        consumer.position = consumer.committed
        return PartitionLedger("t", 0, disk.highest())

    for action, arg in steps:
        if action == "consume":
            consume(arg)
        elif action == "flush" and not flush(arg):
            ledger = crash()
        elif action == "commit":
            consumer.commit()
        elif action == "crash":
            ledger = crash()
        elif action == "seek-back":
            consumer.position = max(consumer.committed, consumer.position - arg)
    # then it runs to the end without trouble
    while consumer.position < len(buckets):
        consume(len(buckets))
    assert flush(crash_after=99)
    consumer.commit()
    assert consumer.committed == len(buckets)

    archived = Counter(o for items in disk.files.values() for _, offsets in items for o in offsets)
    assert archived == Counter(o for o, b in enumerate(buckets) if b is not None)
    for bucket, items in disk.files.items():
        ranges = sorted((f.first, f.last) for f, _ in items)
        for (_, last), (first, _) in itertools.pairwise(ranges):
            assert last < first, f"overlapping files in {bucket}: {ranges}"
        for file, offsets in items:
            assert (file.first, file.last) == (offsets[0], offsets[-1])
            assert all(buckets[o] == bucket for o in offsets)
            # a file holds every valid record of its hour in its range
            assert list(offsets) == [
                o for o in range(file.first, file.last + 1) if buckets[o] == bucket
            ]
