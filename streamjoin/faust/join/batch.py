"""The durability steps of one join batch, in the order that survives a crash anywhere.

A batch is what the tasks released and applied since the previous one: the
records to produce (:attr:`Batch.outputs`) and the tasks whose batch state
changed (:attr:`Batch.touched`). The operator makes it durable by calling, in
this order and each only after the previous one returned:

1. :func:`send_outputs_and_content`: the outputs and every touched task's
   state changes except its input positions are sent together, and all are
   acknowledged by the broker;
2. :func:`send_positions`: the input positions (each task's last changes)
   are sent to the changelog and acknowledged;
3. and 4. :func:`commit_and_ack`: the same changes go to each task's RocksDB
   database in one write batch with the changelog offset reached, then the
   task's input records are acked (faust may commit their offsets).

Every changelog record carries the task's owner token
(:data:`~streamjoin.restore.ownership.OWNER_HEADER`): records a worker sends
after it lost the task are skipped by whoever restores it. The operator checks
before steps 1, 2 and 3 that the worker still owns the task (its session lease
is valid, no rebalance began since the batch did, the token is current) and
abandons the batch otherwise: nothing more is sent, written to RocksDB or acked.

A changelog is a state only once it has the positions, and they are sent after
the outputs are acknowledged: a crash before that leaves a changelog whose
positions are the previous batch's, with any prefix of this batch's other
changes (a state the logic passed through), so the batch's records are read
again and its outputs re-emitted with the same key and value (effectively
once, by key). An input record is acked only once the state saying it was
applied is durable, so faust never commits past the state's position.

Records go out through :class:`Sender`: in record batches per partition
through aiokafka's batch API (one future per batch, not per record), or
record by record through faust's producer when the app produces in
transactions (``processing_guarantee="exactly_once"``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamjoin.faust.join.tasks import JoinTask, Output

__all__ = [
    "Batch",
    "Sender",
    "commit_and_ack",
    "make_durable",
    "send_outputs_and_content",
    "send_positions",
]

#: a record to send: (topic, partition or None: by key, key, value, headers)
Record = tuple[str, int | None, bytes | None, bytes | None, Sequence[tuple[str, bytes]] | None]
#: records sent: (topic, partition, future of the first one's metadata, how many)
Sent = tuple[str, int, Any, int]


@dataclass
class Batch:
    """What one batch produces: records for the output topics, and the tasks it changed."""

    outputs: list[Output] = field(default_factory=list)
    touched: list[JoinTask] = field(default_factory=list)


class Sender:
    """Sends records and waits for their acknowledgements, in bulk when it can."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def _bulk(self) -> Any:
        """aiokafka's producer when its batch API may be used, else ``None``."""
        if "exactly" in str(getattr(self.app.conf, "processing_guarantee", "")):
            return None  # faust sends in its transactions
        try:
            aio = self.app.producer._ensure_producer()
        except Exception:  # not started, or not the aiokafka driver
            return None
        return aio if hasattr(aio, "create_batch") and hasattr(aio, "send_batch") else None

    async def send(self, records: Sequence[Record]) -> list[Sent]:
        """Send *records* (each partition's in the given order); nothing awaited
        beyond the producer's own buffering."""
        aio = self._bulk()
        if aio is None:
            producer = self.app.producer
            sent = []
            for topic, partition, key, value, headers in records:
                fut = await producer.send(topic, key, value, partition, None, headers)
                sent.append((topic, -1 if partition is None else partition, fut, 1))
            return sent
        groups: dict[tuple[str, int], list[Record]] = {}
        known: set[str] = set()
        for record in records:
            topic, partition, key = record[0], record[1], record[2]
            if partition is None:
                if topic not in known:
                    await aio.client._wait_on_metadata(topic)
                    known.add(topic)
                partition = aio._partition(topic, None, key, None, key, None)
            groups.setdefault((topic, partition), []).append(record)
        sent = []
        for (topic, partition), group in groups.items():
            builder, n = aio.create_batch(), 0
            for _, _, key, value, headers in group:
                if _append(builder, key, value, headers):
                    n += 1
                    continue
                fut = await aio.send_batch(builder, topic, partition=partition)
                sent.append((topic, partition, fut, n))
                builder, n = aio.create_batch(), 1
                if not _append(builder, key, value, headers):
                    raise ValueError(f"a record for {topic}[{partition}] does not fit in a batch")
            if n:
                fut = await aio.send_batch(builder, topic, partition=partition)
                sent.append((topic, partition, fut, n))
        return sent


def _append(builder: Any, key: bytes | None, value: bytes | None, headers: Any) -> bool:
    """Add a record to an aiokafka record batch; ``False`` when the batch is full."""
    return builder.append(timestamp=None, key=key, value=value, headers=headers or []) is not None


async def acknowledged(sent: Sequence[Sent], topic: str) -> dict[int, int]:
    """Wait until every record of *sent* is acknowledged; returns the last
    offset reached per partition of *topic*."""
    metas = await asyncio.gather(*(fut for _, _, fut, _ in sent))
    last: dict[int, int] = {}
    for (t, partition, _, n), meta in zip(sent, metas, strict=True):
        if t == topic:
            last[partition] = max(last.get(partition, -1), meta.offset + n - 1)
    return last


async def send_outputs_and_content(
    sender: Sender,
    outputs: list[Output],
    changelog_topic: str,
    touched: list[JoinTask],
    on_sent: Callable[[], None] = lambda: None,
) -> dict[int, int]:
    """Step 1: send the outputs and every touched task's changes but its input
    positions, together; wait for all acknowledgements (*on_sent* is called
    in between). Returns the last changelog offset per partition."""
    records: list[Record] = [(t, None, k, v, h) for t, k, v, h in outputs]
    for task in touched:
        content = task.state.content
        headers = task.owner_headers
        records.extend(
            (changelog_topic, task.partition, key, value, headers)
            for key, value in content[: task.positions_at]
        )
    sent = await sender.send(records)
    on_sent()
    return await acknowledged(sent, changelog_topic)


async def send_positions(
    sender: Sender,
    changelog_topic: str,
    touched: list[JoinTask],
    last: dict[int, int],
    on_sent: Callable[[], None] = lambda: None,
) -> dict[int, int]:
    """Step 2: send every touched task's input positions (its last changes) to
    its changelog partition; wait for the acknowledgements (*on_sent* is
    called in between). Returns *last* updated with the offsets they reached."""
    records: list[Record] = []
    for task in touched:
        content = task.state.content
        headers = task.owner_headers
        records.extend(
            (changelog_topic, task.partition, key, value, headers)
            for key, value in content[task.positions_at :]
        )
    sent = await sender.send(records)
    on_sent()
    reached = await acknowledged(sent, changelog_topic)
    return {p: max(last.get(p, -1), reached.get(p, -1)) for p in {*last, *reached}}


def commit_and_ack(
    touched: list[JoinTask],
    offset_key: bytes,
    last: dict[int, int],
    db_for: Callable[[int], Any],
    ack: Callable[[str, int, int, int], None],
    on_written: Callable[[], None] = lambda: None,
) -> None:
    """Steps 3 and 4: write each task's changes and changelog offset to RocksDB,
    then (*on_written* called in between) ack every task's input records.

    *db_for* gives the task's database now (it is looked up again, not reused);
    *ack* acks offsets ``first..last`` of a side's partition: ``(side,
    partition, first, last)``.
    """
    for task in touched:
        task.state.db = db_for(task.partition)
        task.state.commit(offset_key, last.get(task.partition))
    on_written()
    for task in touched:
        for side, (first, end) in task.unacked_range.items():
            ack(side, task.partition, first, end)
        task.unacked_range.clear()


async def make_durable(
    sender: Sender,
    changelog_topic: str,
    batch: Batch,
    offset_key: bytes,
    db_for: Callable[[int], Any],
    ack: Callable[[str, int, int, int], None],
    still_owner: Callable[[], bool],
    crash: Callable[[str], None],
) -> bool:
    """Steps 1 to 4 of *batch*, in order; ``False`` when it was abandoned.

    *still_owner* is asked before steps 1, 2 and 3: once it says no, nothing
    more of the batch is sent, written or acked. *crash* is told each point a
    test may crash the worker at (:mod:`~streamjoin.faust.join.fault_points`).
    """
    if not still_owner():
        return False
    touched = batch.touched
    last = await send_outputs_and_content(
        sender, batch.outputs, changelog_topic, touched, lambda: crash("outputs-sent")
    )
    crash("outputs-acked")
    if not still_owner():
        return False
    last = await send_positions(
        sender, changelog_topic, touched, last, lambda: crash("positions-sent")
    )
    crash("positions-acked")
    if not still_owner():
        return False
    commit_and_ack(touched, offset_key, last, db_for, ack, lambda: crash("rocksdb-written"))
    crash("acked")
    return True
