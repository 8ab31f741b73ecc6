"""The durability steps of one join batch, in the order that survives a crash anywhere.

A batch is what the tasks released and applied since the previous one: the
records to produce (:attr:`Batch.outputs`) and the tasks whose batch state
changed (:attr:`Batch.touched`). The operator makes it durable by calling, in
this order and each only after the previous one returned:

1. :func:`send_outputs_and_content`: the outputs are sent and acknowledged by
   the broker, then every touched task's state changes except its input
   positions are sent and acknowledged;
2. :func:`send_positions`: the input positions (each task's last changes)
   are sent to the changelog and acknowledged;
3. and 4. :func:`commit_and_ack`: the same changes go to each task's RocksDB
   database in one write batch with the changelog offset reached, then the
   task's input records are acked (faust may commit their offsets).

Why this order survives a crash between any two steps, and what it asks of
a policy, is the contract in docs/joins.rst ("Delivery: effectively once, by
key"; "A worker frozen past its session" for the ownership checks before
steps 1, 2 and 3); it is written there once. Records go out through the bulk
producer (:class:`~streamjoin.faust.kafka.producer.Sender`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.join.types import Output
from streamjoin.faust.kafka.producer import Record, Sender, Sent

if TYPE_CHECKING:
    from rocksdict import Rdict

__all__ = [
    "Batch",
    "commit_and_ack",
    "make_durable",
    "send_outputs_and_content",
    "send_positions",
]


@dataclass
class Batch:
    """What one batch produces: records for the output topics, and the tasks it changed."""

    outputs: list[Output] = field(default_factory=list)
    touched: list[JoinTask] = field(default_factory=list)


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
    """Step 1: send the outputs and wait for their acknowledgements (*on_sent* is
    called in between), then send every touched task's changes but its input
    positions and wait for theirs. Returns the last changelog offset per partition.

    The changes wait for the outputs: an output lost in a crash is emitted
    again only by a replay that decides it again, and a replay does not decide
    again what a restored change says is decided (a click that arrived in an
    earlier batch and was decided in this one is not replayed at all).
    """
    sent = await sender.send([(t, None, k, v, h) for t, k, v, h in outputs])
    on_sent()
    await acknowledged(sent, changelog_topic)
    records: list[Record] = []
    for task in touched:
        content = task.state.content
        headers = task.owner_headers
        records.extend(
            (changelog_topic, task.partition, key, value, headers)
            for key, value in content[: task.positions_at]
        )
    return await acknowledged(await sender.send(records), changelog_topic)


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
    db_for: Callable[[int], Rdict],
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
    db_for: Callable[[int], Rdict],
    ack: Callable[[str, int, int, int], None],
    owned: Callable[[list[JoinTask], bool], list[JoinTask]],
    crash: Callable[[str], None],
) -> bool:
    """Steps 1 to 4 of *batch*, in order; ``False`` when no task of it got through.

    ``owned(tasks, whole)`` is asked before steps 1, 2 and 3 which of *tasks*
    may go on; nothing more is sent, written or acked for the others. Before
    step 1 it is asked with *whole* true: the outputs belong to the batch, not
    to a task, so the batch goes on with all its tasks or with none. From step
    2 on each task's steps are its own (its changelog partition, its RocksDB
    database, its input offsets): the tasks still owned complete the batch
    as if it had been theirs alone. *crash* is told each point a test may
    crash the worker at (:mod:`~streamjoin.faust.join.fault_points`).
    """
    touched = batch.touched
    if len(owned(touched, True)) < len(touched):
        return False
    last = await send_outputs_and_content(
        sender, batch.outputs, changelog_topic, touched, lambda: crash("outputs-sent")
    )
    crash("outputs-acked")
    touched = owned(touched, False)
    if not touched:
        return False
    last = await send_positions(
        sender, changelog_topic, touched, last, lambda: crash("positions-sent")
    )
    crash("positions-acked")
    touched = owned(touched, False)
    if not touched:
        return False
    commit_and_ack(touched, offset_key, last, db_for, ack, lambda: crash("rocksdb-written"))
    crash("acked")
    return True
