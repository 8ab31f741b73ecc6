"""Table restoration with real workers, a real broker and real RocksDB.

Every worker is a ``streamjoin worker`` subprocess running
``tests/integration/apps/counter.py`` (``latest[key] = value`` per event).
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka_util import (
    create_topic,
    delete_topic,
    encode,
    end_offsets,
    first_processed,
    produce,
    read_rocksdb,
    read_status,
    replay_changelog,
    run,
    wait_until,
)

from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.dev.process import WorkerProcess

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PARTITIONS = 4
TABLE = "latest"
RESTORED = r"tables restored:"
APPLIED = re.compile(r"restored changelog \S+\[(\d+)\]: (\d+) records applied")


def changelog(app_id: str) -> str:
    return f"{app_id}-{TABLE}-changelog"


def events_topic(app_id: str) -> str:
    return f"{app_id}-events"


def applied_counts(lines: list[str]) -> dict[int, int]:
    """Partition -> records applied, from ``restored changelog`` log lines."""
    out: dict[int, int] = {}
    for line in lines:
        match = APPLIED.search(line)
        if match:
            out[int(match.group(1))] = int(match.group(2))
    return out


def assert_local_state_is_changelog(broker: EmbeddedBroker, datadir: Path, app_id: str) -> None:
    """The stopped worker's RocksDB equals the changelog replayed here, partition by partition."""
    state, highwaters = run(replay_changelog(broker.bootstrap, changelog(app_id), PARTITIONS))
    for partition in range(PARTITIONS):
        local, offset = read_rocksdb(datadir, TABLE, partition)
        assert local == state[partition], f"partition {partition} differs from its changelog"
        if highwaters[partition]:
            assert offset == highwaters[partition] - 1


def produce_events(broker: EmbeddedBroker, app_id: str, start: int, count: int) -> None:
    """Events ``i`` for ``start <= i < start + count``; key ``k{i % 700}``, value ``i``."""
    records = [(encode(f"k{i % 700}"), encode(i), None) for i in range(start, start + count)]
    run(produce(broker.bootstrap, events_topic(app_id), records))


def expected_latest(upto: int) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for i in range(upto):
        out[encode(f"k{i % 700}")] = encode(i)
    return out


def merged_changelog(broker: EmbeddedBroker, app_id: str) -> dict[bytes, bytes]:
    state, _ = run(replay_changelog(broker.bootstrap, changelog(app_id), PARTITIONS))
    merged: dict[bytes, bytes] = {}
    for part in state.values():
        merged.update(part)
    return merged


def caught_up(broker: EmbeddedBroker, worker: WorkerProcess, app_id: str) -> bool:
    """The worker's persisted offsets of its actives reached the changelog's end."""
    status = read_status(worker.datadir)
    if status is None or status["pid"] != worker.pid:
        return False
    _, highwaters = run(replay_changelog(broker.bootstrap, changelog(app_id), PARTITIONS))
    persisted = {p: o for _, p, o in status["persisted_offsets"]}
    return all(persisted.get(p, -1) >= highwaters[p] - 1 for p in status["actives"])


@pytest.mark.parametrize("plain_faust", [False, True], ids=["streamjoin-app", "faust-app"])
def test_changelog_written_in_multi_record_batches_restores_completely(
    broker: EmbeddedBroker, workers: Any, plain_faust: bool
) -> None:
    app_id = workers.app_id
    topic = changelog(app_id)
    run(create_topic(broker.bootstrap, topic, PARTITIONS))
    records = [(encode(f"k{i % 3000}"), encode(i), i % PARTITIONS) for i in range(20_000)]
    run(produce(broker.bootstrap, topic, records))
    lagging = run(end_offsets(broker.bootstrap, topic, PARTITIONS))
    state, highwaters = run(replay_changelog(broker.bootstrap, topic, PARTITIONS))
    assert sum(highwaters.values()) == 20_000
    # the broker's ListOffsets answer lags: the case that breaks faust's recovery
    assert any(lagging[p] < highwaters[p] for p in range(PARTITIONS))

    worker = workers.spawn("w1", env={"SJ_TEST_PLAIN_FAUST": "1"} if plain_faust else {})
    worker.wait_for_log(RESTORED, 90)
    counts = applied_counts(worker.wait_for_log(APPLIED.pattern, 10, count=PARTITIONS))
    assert counts == {p: highwaters[p] for p in range(PARTITIONS)}
    worker.stop()
    for partition in range(PARTITIONS):
        local, offset = read_rocksdb(worker.datadir, TABLE, partition)
        assert local == state[partition]
        assert offset == highwaters[partition] - 1


def test_kill9_mid_stream_then_restart_restores_exactly_before_processing(
    broker: EmbeddedBroker, workers: Any
) -> None:
    app_id = workers.app_id
    run(create_topic(broker.bootstrap, events_topic(app_id), PARTITIONS))
    first = workers.spawn("w")
    first.wait_for_log(RESTORED, 90)

    total = 12_000
    producer = threading.Thread(
        target=lambda: [
            (produce_events(broker, app_id, start, 500), time.sleep(0.1))
            for start in range(0, total, 500)
        ],
        daemon=True,
    )
    producer.start()

    def mid_stream() -> bool:
        status = read_status(first.datadir)
        return bool(status and sum(o for _, _, o in status["persisted_offsets"]) > 2_000)

    wait_until(mid_stream, 60, "the first worker to process part of the stream")
    first.kill()  # SIGKILL: no shutdown, no flush
    producer.join(timeout=120)
    assert not producer.is_alive()

    second = workers.spawn("w")  # same data directory
    second.wait_for_log(RESTORED, 90)
    produce_events(broker, app_id, total, 200)
    wait_until(
        lambda: merged_changelog(broker, app_id) == expected_latest(total + 200),
        90,
        "the restarted worker to process every event",
        interval=0.5,
    )
    wait_until(lambda: caught_up(broker, second, app_id), 30, "local state to catch up")
    mine = [line for line in first_processed(second.datadir) if line["pid"] == second.pid]
    assert mine, "the restarted worker processed nothing"
    for line in mine:
        assert line["restored_at"] is not None, line
        assert line["restored_at"] <= line["processed_at"], line
    second.stop()
    assert_local_state_is_changelog(broker, second.datadir, app_id)


def test_kill9_during_restore_then_restart_finishes_exactly(
    broker: EmbeddedBroker, workers: Any
) -> None:
    app_id = workers.app_id
    topic = changelog(app_id)
    run(create_topic(broker.bootstrap, topic, PARTITIONS))
    total = 80_000
    records = [(encode(f"k{i % 20_000}"), encode(i), i % PARTITIONS) for i in range(total)]
    # small batches: a restore with tiny fetches then takes seconds, time to interrupt it
    run(produce(broker.bootstrap, topic, records, linger_ms=5, max_batch_size=512), 120)

    slow = workers.spawn("w", env={"SJ_TEST_RESTORE_FETCH_BYTES": "1024"})
    progress = re.compile(r"restoring table latest: (\d+)/(\d+) records")

    def partial() -> bool:
        for line in slow.log_text().splitlines():
            match = progress.search(line)
            if match and 0 < int(match.group(1)) < int(match.group(2)):
                return True
        return False

    wait_until(partial, 90, "a progress line in the middle of the restore", interval=0.02)
    slow.kill()
    assert RESTORED not in slow.log_text(), "restore finished before the kill: make it slower"

    resumed = workers.spawn("w")
    resumed.wait_for_log(RESTORED, 90)
    counts = applied_counts(resumed.wait_for_log(APPLIED.pattern, 10, count=PARTITIONS))
    assert 0 < sum(counts.values()) < total  # resumed from the offsets persisted before the kill
    resumed.stop()
    assert_local_state_is_changelog(broker, resumed.datadir, app_id)


def test_changelog_recreated_under_persisted_state_is_restored_again(
    broker: EmbeddedBroker, workers: Any
) -> None:
    app_id = workers.app_id
    run(create_topic(broker.bootstrap, events_topic(app_id), PARTITIONS))
    worker = workers.spawn("w")
    worker.wait_for_log(RESTORED, 90)
    produce_events(broker, app_id, 0, 2_000)
    wait_until(lambda: merged_changelog(broker, app_id) == expected_latest(2_000), 60, "events")
    wait_until(lambda: caught_up(broker, worker, app_id), 30, "local state to catch up")
    worker.stop()

    topic = changelog(app_id)
    run(delete_topic(broker.bootstrap, topic))
    run(create_topic(broker.bootstrap, topic, PARTITIONS))
    fresh = [(encode(f"new-{p}-{j}"), encode(j), p) for p in range(PARTITIONS) for j in range(5)]
    run(produce(broker.bootstrap, topic, fresh))

    again = workers.spawn("w")
    again.wait_for_log(RESTORED, 90)
    warnings = again.wait_for_log(r"WARNING.*wiping this partition's local state", 5)
    assert warnings
    produce_events(broker, app_id, 2_000, 10)
    wait_until(
        lambda: encode(2_009) in merged_changelog(broker, app_id).values(),
        60,
        "the worker to keep processing after the wipe",
        interval=0.5,
    )
    assert again.running()
    wait_until(lambda: caught_up(broker, again, app_id), 30, "local state to catch up")
    again.stop()
    assert_local_state_is_changelog(broker, again.datadir, app_id)
    merged = {}
    for partition in range(PARTITIONS):
        merged.update(read_rocksdb(again.datadir, TABLE, partition)[0])
    assert encode("k0") not in merged or merged[encode("k0")] != encode(1_400)  # old state gone
    assert all(encode(f"new-{p}-4") in merged for p in range(PARTITIONS))


def test_standby_holder_restores_only_what_it_had_not_applied(
    broker: EmbeddedBroker, workers: Any
) -> None:
    app_id = workers.app_id
    run(create_topic(broker.bootstrap, events_topic(app_id), PARTITIONS))
    standby = ("--standby-replicas", "1")
    a = workers.spawn("a", extra_args=standby)
    a.wait_for_log(RESTORED, 90)
    # b's standby follower may take a quarter of the time only (see below)
    b = workers.spawn("b", extra_args=(*standby, "--standby-share", "0.25"))

    def split() -> bool:
        sa, sb = read_status(a.datadir), read_status(b.datadir)
        return bool(
            sa
            and sb
            and len(sa["actives"]) == 2
            and len(sb["actives"]) == 2
            and len(sb["standbys"]) == 2
        )

    wait_until(split, 90, "two workers with two actives and two standbys each")
    total = 4_000
    produce_events(broker, app_id, 0, total)
    wait_until(lambda: merged_changelog(broker, app_id) == expected_latest(total), 60, "events")
    _, highwaters = run(replay_changelog(broker.bootstrap, changelog(app_id), PARTITIONS))

    def standby_caught_up() -> dict[int, int] | None:
        status = read_status(b.datadir)
        if status is None:
            return None
        offsets = {p: o for _, p, o in status["standby_offsets"]}
        if set(offsets) == set(status["standbys"]) and all(
            offsets[p] >= highwaters[p] - 1 for p in offsets
        ):
            return offsets
        return None

    standby_offsets = wait_until(standby_caught_up, 60, "b's standbys to catch up")
    assert sum(o + 1 for o in standby_offsets.values()) > 0
    # it kept to its share: after rounds that kept it busy t s it rested 3t (share 0.25);
    # nothing new arrives now, so the last rest ends and the totals settle
    def pacing_settled() -> dict[str, Any] | None:
        pacing: dict[str, Any] = read_status(b.datadir)["standby_pacing"]
        return pacing if pacing["resting"] >= 0.95 * 3 * pacing["busy"] else None

    pacing = wait_until(pacing_settled, 20, "b's standby follower to finish its rests")
    assert pacing["share"] == 0.25
    assert pacing["applied"] >= sum(o + 1 for o in standby_offsets.values()), pacing
    assert pacing["busy"] > 0
    taken_over = set(standby_offsets)

    a.kill()

    def took_over() -> dict[str, Any] | None:
        status = read_status(b.datadir)
        if status and sorted(status["actives"]) == list(range(PARTITIONS)):
            return status
        return None

    wait_until(took_over, 90, "b to take over every partition")

    def restored_counts() -> dict[int, int] | None:
        status = read_status(b.datadir)
        counts = {p: n for _, p, n in status["restore_counts"]} if status else {}
        return counts if taken_over <= set(counts) else None

    counts = wait_until(restored_counts, 30, "b to restore the partitions it took over")
    records_applied_before = {p: standby_offsets[p] + 1 for p in taken_over}
    for p in taken_over:
        missing = highwaters[p] - records_applied_before[p]
        assert counts[p] == missing == 0, (p, counts, records_applied_before, highwaters)
    b.stop()
    assert_local_state_is_changelog(broker, b.datadir, app_id)
