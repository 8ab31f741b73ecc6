"""Applying a join task's received records: the :class:`RecordRouter`.

It stages each task's part of a batch (:meth:`RecordRouter.stage`): skips
replays (records before the task state's position), decodes the rest with
the policy, feeds them to the task's logic, tells the logic which inputs went
idle, turns what comes out into records for the output and dead-letter topics,
and writes the task's input positions last. The tasks hold state; the router
drives them. Nothing here sends, awaits or acks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from streamjoin.faust.join.stats import JoinStats
from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.join.types import SIDES, Chunk, InputRecord, Output
from streamjoin.join import keys
from streamjoin.join.errors import JoinConfigError
from streamjoin.join.policy import (
    DEAD_LETTER,
    REASON_HEADER,
    SOURCE_HEADER,
    Emission,
    JoinPolicy,
    chunk_decoder,
    feed_chunk,
)

__all__ = ["OVERSIZED_KEPT", "SIZE_HEADER", "RecordRouter"]

#: bytes of an oversized record's value its dead letter keeps
OVERSIZED_KEPT = 1024
#: header of an oversized record's dead letter: the record's size in bytes
SIZE_HEADER = "streamjoin-size"


class RecordRouter:
    """Applies received records to their task's logic and routes the results.

    Attributes:
        name: the join's name (in error messages).
        policy: decodes the records.
        stats: the join's counters, updated per record.
        outputs: output name -> the topic the output's results go to.
        dead_letters: the topic of records that cannot be joined.
        max_record_bytes: larger input records (key and value) are dead-lettered.
    """

    def __init__(
        self,
        name: str,
        policy: JoinPolicy,
        stats: JoinStats,
        outputs: Mapping[str, str],
        dead_letters: str,
        *,
        max_record_bytes: int = 512 * 1024,
    ) -> None:
        self.name = name
        self.max_record_bytes = max_record_bytes
        self.policy = policy
        self._decode = chunk_decoder(policy)
        self.stats = stats
        self.outputs = outputs
        self.dead_letters = dead_letters

    def stage(
        self,
        task: JoinTask,
        received: Sequence[Chunk],
        idle: Sequence[str],
        now: float | None = None,
    ) -> list[Output]:
        """Apply *task*'s *received* records, then tell its logic which inputs went
        *idle*; return the records to produce.

        What to ack once the batch is durable is kept in the task's
        ``unacked_range``; its input positions are written last: a changelog
        that has them has everything the batch changed before them. A batch
        that applied records is a step of the task's
        :class:`~streamjoin.join.activity.TaskActivity` at *now* (wall-clock
        seconds; ``None``: ``time.time()``).
        """
        outputs: list[Output] = []
        ranges = task.unacked_range
        processed = self.stats.processed
        for side, records in received:
            outputs.extend(self.apply(task, side, records))
            first, last = records[0].offset, records[-1].offset
            if side in ranges:
                first = min(first, ranges[side][0])
                last = max(last, ranges[side][1])
            ranges[side] = (first, last)
            task.idle.discard(side)  # a record makes its input active again
        applied = self.stats.processed - processed
        if applied:
            stopped = task.activity.step(time.time() if now is None else now, applied)
            if stopped:
                self.stats.task_stops.observe(stopped)
        logic = task.logic
        for side in idle:
            if logic is not None and side not in task.idle:
                task.idle.add(side)
                self.stats.idle_inputs += 1
                outputs.extend(self.route(logic.set_idle(side, True)))
        if logic is not None:
            logic.checkpoint()
        task.positions_at = len(task.state.content)
        for side in SIDES:
            position = task.position[side]
            if position is not None:
                task.state.put(keys.position_key(side), int(position).to_bytes(8, "big"))
        return outputs

    def apply(self, task: JoinTask, side: str, records: Sequence[InputRecord]) -> list[Output]:
        """Apply *records* of *side* (offset order); replays (before the position)
        are skipped. A record has ``offset``, ``key``, ``value`` and
        ``timestamp`` (ms), as :class:`Fetched` and aiokafka's records do.

        The records are decoded and fed to the logic a chunk at a time
        (:meth:`JoinPolicy.decode_chunk`, :meth:`TaskLogic.on_chunk`, or one
        record at a time for a policy or logic without them); the records out
        are in the order of the records in, as if one at a time.
        """
        logic = task.logic
        if logic is None:  # opened when first seen; a dropped task never reaches here
            raise JoinConfigError(f"join {self.name!r}: task {task.partition} is not open")
        stats = self.stats
        position = task.position[side]
        fresh = records
        if position is not None and records[0].offset < position:
            fresh = [record for record in records if record.offset >= position]
            stats.skipped_replays += len(records) - len(fresh)
        if not fresh:
            return [*self.route(logic.settle())]
        limit = self.max_record_bytes
        # (index in fresh, record out) of the records that are not joined
        refused = [
            (i, self.oversized(record, size))
            for i, record in enumerate(fresh)
            if (size := len(record.key or b"") + len(record.value or b"")) > limit
        ]
        kept_at = range(len(fresh))  # the index in fresh of each record decoded
        if refused:
            too_big = {i for i, _ in refused}
            kept_at = [i for i in kept_at if i not in too_big]  # type: ignore[assignment]
        kept = fresh if not refused else [fresh[i] for i in kept_at]
        decoded, bad = self._decode(side, kept)
        for i, reason in bad:
            refused.append((kept_at[i], self.dead_letter(kept[i], reason.encode())))
        emitted = feed_chunk(logic, side, decoded)
        stats.bad += len(refused)
        out: list[Output] = []
        if refused:
            # the index in fresh of each record fed to the logic
            unfed = {i for i, _ in bad}
            fed_at = [at for i, at in enumerate(kept_at) if i not in unfed]
            placed = [*refused]
            for i, emission in emitted:
                at = fed_at[i]
                placed.extend((at, output) for output in self.route((emission,), fresh[at]))
            placed.sort(key=lambda item: item[0])  # stable: a record's own order is kept
            out.extend(output for _, output in placed)
        else:
            for i, emission in emitted:
                out.extend(self.route((emission,), fresh[i]))
        settled = logic.settle()
        if settled:
            out.extend(self.route(settled))
        task.position[side] = fresh[-1].offset + 1
        stats.processed += len(fresh)
        return out

    def route(
        self, emitted: Sequence[Emission], message: InputRecord | None = None
    ) -> list[Output]:
        """Records for what the logic emitted; a late record is dead-lettered as
        *message* (the record being applied; idleness changes emit none)."""
        out = []
        for emission in emitted:
            if emission.output == DEAD_LETTER:
                if message is None:
                    raise JoinConfigError(
                        f"join {self.name!r}: the policy dead-lettered without a record"
                    )
                self.stats.late += 1
                out.append(self.dead_letter(message, emission.value))
                continue
            self.stats.emitted[emission.output] = self.stats.emitted.get(emission.output, 0) + 1
            topic = self.outputs[emission.output]
            out.append((topic, emission.key, emission.value, None))
        return out

    def oversized(self, message: InputRecord, size: int) -> Output:
        """The dead letter of a record over the limit: its key, the first KiB of its
        value and its size (the source header says where the whole record is)."""
        reason = (
            f"record of {size} bytes is over the join's limit of {self.max_record_bytes} "
            "bytes (max_record_bytes)"
        ).encode()
        topic, key, _, headers = self.dead_letter(message, reason)
        value = (message.value or b"")[:OVERSIZED_KEPT]
        return (topic, key, value, [*(headers or ()), (SIZE_HEADER, str(size).encode())])

    def dead_letter(self, message: InputRecord, reason: bytes) -> Output:
        """The dead-letter record of *message*, with the reason and the source in headers."""
        source = f"{message.topic}:{message.partition}:{message.offset}".encode()
        value = message.value if message.value is not None else b""
        headers = [(REASON_HEADER, reason), (SOURCE_HEADER, source)]
        self.stats.emitted[DEAD_LETTER] = self.stats.emitted.get(DEAD_LETTER, 0) + 1
        return (self.dead_letters, message.key, value, headers)
