"""The durability steps of one join batch, in the order that survives a crash anywhere.

A batch is what the tasks released and applied since the previous one: the
records to produce (:attr:`Batch.outputs`) and the tasks whose batch state
changed (:attr:`Batch.touched`). The operator makes it durable by calling, in
this order and each only after the previous one returned:

1. :func:`send_outputs`: outputs are sent and acknowledged by the broker;
2. :func:`send_changelog`: every touched task's state changes (the input
   positions last) are sent to the changelog and acknowledged;
3. and 4. :func:`commit_and_ack`: the same changes go to each task's RocksDB
   database in one write batch with the changelog offset reached, then the
   task's input records are acked (faust may commit their offsets).

After a crash, a batch whose state was lost is read again from the input and
its outputs are re-emitted with the same key and value (effectively once, by
key); an input record is acked only once the state saying it was applied is
durable, so faust never commits past the state's position.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamjoin.faust.join_tasks import JoinTask, Output

__all__ = ["Batch", "commit_and_ack", "send_changelog", "send_outputs"]


@dataclass
class Batch:
    """What one batch produces: records for the output topics, and the tasks it changed."""

    outputs: list[Output] = field(default_factory=list)
    touched: list[JoinTask] = field(default_factory=list)


async def send_outputs(producer: Any, outputs: list[Output]) -> None:
    """Step 1: send every output record, then wait until the broker acknowledged all."""
    futures = [await producer.send(t, k, v, None, None, h) for t, k, v, h in outputs]
    if futures:
        await asyncio.gather(*futures)


async def send_changelog(
    producer: Any, changelog_topic: str, touched: list[JoinTask]
) -> dict[int, int]:
    """Step 2: send every task's state changes to its changelog partition, in order.

    Returns the last acknowledged changelog offset per partition, once every
    change is acknowledged.
    """
    changelog: list[tuple[JoinTask, Any]] = []
    for task in touched:
        for key, value in task.state.content:
            fut = await producer.send(changelog_topic, key, value, task.partition, None, None)
            changelog.append((task, fut))
    last: dict[int, int] = {}
    for task, fut in changelog:
        meta = await fut
        last[task.partition] = max(last.get(task.partition, -1), meta.offset)
    return last


def commit_and_ack(
    touched: list[JoinTask],
    offset_key: bytes,
    last: dict[int, int],
    db_for: Callable[[int], Any],
) -> None:
    """Steps 3 and 4: write each task's changes and changelog offset to RocksDB, then ack.

    *db_for* gives the task's database now (it is looked up again, not reused).
    """
    for task in touched:
        task.state.db = db_for(task.partition)
        task.state.commit(offset_key, last.get(task.partition))
        for event in task.unacked:
            event.ack()
        task.unacked.clear()
