"""A join's tasks across rebalances: which stay open, which close, which open.

faust rebalances eagerly: every partition is revoked, then the new
assignment arrives. A task whose partition stays on this worker is parked at
the revoke (its buffered records dropped unacknowledged) and goes on with its
open state and indexes; only the tasks that left are closed. The task of
every assigned partition is opened (or resumed) as soon as its tables are
restored, even before its next record: a task whose inputs saw their last
records before the rebalance still has decisions to let out once its inputs
go idle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.restore.warmup_watch import request_rebalance

__all__ = ["HANDOVER_SHARE", "TaskLifecycle", "now_ms"]

#: share of the session timeout a revoke waits for the batch in flight
HANDOVER_SHARE = 0.5

logger = logging.getLogger("streamjoin.faust.join.operator")


def now_ms() -> int:
    """Wall time for idleness (monotonic milliseconds)."""
    return int(time.monotonic() * 1000)


class TaskLifecycle:
    """Opening, parking, resuming and closing a join's tasks (mixed into ``Join``)."""

    # set by Join._init_runtime
    _tasks: dict[int, JoinTask]
    _parked: dict[int, JoinTask]
    _assigned: frozenset[int]
    _revoking: bool
    _epoch: int
    _buffered: int
    _lapse_logged: bool
    _abandoned: dict[int, float]
    changelog_topic: str
    _lock: Any
    app: Any
    intake: Any
    table: Any
    stats: Any
    name: str
    policy: Any
    max_idle_ms: int
    left_topic: str

    def _db(self, partition: int) -> Any:  # pragma: no cover - Join defines it
        raise NotImplementedError

    def _waiting(self) -> int:  # pragma: no cover - Join defines it
        raise NotImplementedError

    # -- ownership: batches are made durable only by the tasks' owner ---------------

    def _may_write(self) -> bool:
        """Is the worker's session lease valid (logged once when it runs out)?"""
        ownership = self._ownership()
        if ownership is None or ownership.may_write():
            self._lapse_logged = False
            return True
        if not self._lapse_logged:
            self._lapse_logged = True
            self.stats.lease_lapses += 1
            logger.warning(
                "join %s: the group session lease ran out (no heartbeat answered for "
                "%.1f s); no batch runs until the coordinator answers again or the "
                "worker has rejoined",
                self.name,
                ownership.lease.session_timeout - ownership.lease.margin,
            )
        return False

    def _still_owner(self, epoch: int, touched: list[JoinTask]) -> bool:
        """May the batch begun in *epoch* go on to its next durability step?

        Not once a revoke stopped waiting for it (its tasks are being handed
        over, see :meth:`on_revoked`), the session lease ran out (the group may
        have given them away) or a task's owner token is no longer current.
        Then the batch is abandoned: nothing more of it is sent, written to
        RocksDB or acked, and its tasks are dropped (they open again from
        their restored state). What it sent already is a
        prefix of a batch, as after a crash; what reaches the changelog after
        another owner's fence marker is skipped by whoever restores it.
        """
        ownership = self._ownership()
        if ownership is None:
            return True
        if self._epoch != epoch:
            reason = "the handover of its tasks did not wait for it"
        elif not ownership.may_write():
            reason = "the group session lease ran out"
        else:
            topic = self.changelog_topic
            lost = [t.partition for t in touched if ownership.token(topic, t.partition) != t.token]
            if not lost:
                return True
            reason = f"task(s) {lost} are no longer owned here"
        self._abandon(touched, reason)
        if self._epoch == epoch:
            request_rebalance(self.app)  # make sure of the membership: rejoin
        return False

    def _abandon(self, touched: list[JoinTask], reason: str) -> None:
        """Drop the tasks of an abandoned batch: unacked, opened again from their state."""
        now = time.time()
        for task in touched:
            partition = task.partition
            for tasks in (self._tasks, self._parked):
                if tasks.get(partition) is task:
                    del tasks[partition]
            task.unacked_range.clear()
            task.state.discard()
            task.state.db = None
            # what the batch sent may be in the changelog: the task opens again
            # only from a state restored after this (the next rebalance's)
            self._abandoned[partition] = now
        self._buffered = self._waiting()
        self.stats.batches_abandoned += 1
        logger.warning(
            "join %s: batch abandoned before it was durable (%s): tasks %s are dropped "
            "unacked and open again from their restored state",
            self.name,
            reason,
            sorted(t.partition for t in touched),
        )

    def _ownership(self) -> Any:
        """The worker's :class:`~streamjoin.faust.restore.ownership.TaskOwnership` (``None``:
        not streamjoin's table manager)."""
        return getattr(self.app.tables, "ownership", None)

    def _open_ready_tasks(self) -> None:
        """Open (or resume) the task of every assigned partition whose tables are
        restored, without waiting for its next record: a task whose inputs saw
        their last records before the rebalance still has decisions to let out
        once its inputs go idle."""
        if self._revoking or not self._assigned:
            return
        ready = getattr(self.app.tables, "restored_at", None)
        if ready is None:
            return
        done = ready()
        for partition in sorted(self._assigned):
            if partition in done and partition not in self._tasks and self._owned(partition):
                self._task(partition)

    def _token(self, partition: int) -> bytes | None:
        """The owner token this worker writes *partition*'s changelog with."""
        ownership = self._ownership()
        return None if ownership is None else ownership.token(self.changelog_topic, partition)

    def _owned(self, partition: int) -> bool:
        """May this worker run *partition*'s task now (its changelog is fenced for
        it, and restored since a batch of it was abandoned)?"""
        abandoned = self._abandoned.get(partition)
        if abandoned is not None:
            ready = getattr(self.app.tables, "restored_at", None)
            restored = None if ready is None else ready().get(partition)
            if restored is None or restored <= abandoned:
                return False
            del self._abandoned[partition]
        return self._ownership() is None or self._token(partition) is not None

    def _task(self, partition: int) -> JoinTask:
        """The live task of *partition*: the one parked across the rebalance when
        it may go on, else a new one opened from its database."""
        task = self._tasks.get(partition)
        if task is not None:
            return task
        db = self._db(partition)
        token = self._token(partition)
        parked = self._parked.pop(partition, None)
        if (
            parked is not None
            and parked.token == token
            and parked.can_resume(db, self.table.data.offset_key)
        ):
            parked.resume(now_ms())
            self.stats.tasks_kept += 1
            self._tasks[partition] = parked
            logger.info("join %s: task %d goes on where it was (kept)", self.name, partition)
            return parked
        if parked is not None:  # its database changed under it: start over from the state
            parked.state.discard()
            parked.state.db = None
        started = time.monotonic()
        task = self._tasks[partition] = JoinTask(partition, self.policy, self.max_idle_ms)
        task.own(token)
        task.open(db, now_ms())
        self.stats.tasks_opened += 1
        logger.info(
            "join %s: task %d opened%s, indexes rebuilt from RocksDB in %.3f s",
            self.name,
            partition,
            " again (its database changed while parked)" if parked is not None else "",
            time.monotonic() - started,
        )
        return task

    def on_revoke(self) -> None:
        """Partitions are being revoked (a rebalance or a shutdown): drop buffered records.

        They are dropped unacknowledged, so faust does not commit them (the
        join sets ``stream_wait_empty`` off: faust does not wait for them
        either); whoever runs the task next reads them again from the
        committed offset, which is never past the task state's position.
        Every task is parked, not closed (faust rebalances eagerly: every
        partition is revoked, then the new assignment comes): the ones that
        stay here go on with their state and indexes, the others are closed
        by :meth:`on_rebalance`. A batch already being made durable completes.
        """
        self._revoking = True
        self._buffered = 0
        self.intake.reset()
        for partition in sorted(self._tasks):
            self._tasks[partition].park()
        self._parked.update(self._tasks)
        self._tasks.clear()

    async def on_revoked(self, *_: Any, **__: Any) -> None:
        """faust's ``on_partitions_revoked`` signal: a clean handover.

        Waits until the batch being made durable is (its records acknowledged,
        RocksDB written, its input acked), so that the member rejoins (and the
        tasks' next owners restore) only after every write of it is on the
        broker. A batch that is not durable within the handover bound is
        abandoned at its next step instead (see :meth:`_still_owner`).
        """
        bound = HANDOVER_SHARE * float(self.app.conf.broker_session_timeout)
        try:
            await asyncio.wait_for(self._lock.acquire(), bound)
        except TimeoutError:
            self._epoch += 1
            logger.warning(
                "join %s: the batch in flight is not durable after %.1f s; it is "
                "abandoned, the partitions are handed over without it",
                self.name,
                bound,
            )
            return
        self._lock.release()

    async def on_rebalance(self, assigned: set[Any]) -> None:
        """The new assignment is known: close the tasks that left, accept records again.

        A parked task of a partition still ours notes its database's changelog
        offset (no batch is in flight under the lock); it resumes on its next
        record if the offset is unchanged then (:meth:`_task`).
        """
        self._revoking = False
        async with self._lock:
            keep = {tp.partition for tp in assigned if tp.topic == self.left_topic}
            self._assigned = frozenset(keep)
            offset_key = self.table.data.offset_key
            closed = []
            for tasks in (self._parked, self._tasks):
                # tasks opened since on_revoke and no longer ours are dropped the
                # same way: unacked, read again elsewhere. A task goes on only
                # where this worker kept it without interruption (the same owner
                # token): after a session loss, or a generation it missed,
                # another worker may have run it meanwhile
                gone = {p for p, t in tasks.items() if p not in keep or t.token != self._token(p)}
                for partition in sorted(gone):
                    task = tasks.pop(partition)
                    self._buffered -= task.waiting
                    task.state.discard()
                    task.state.db = None
                    closed.append(partition)
            for _, task in sorted(self._parked.items()):
                if task.state.db is not None:
                    task.mark_parked(task.state.db, offset_key)
            if closed or self._parked:
                logger.info(
                    "join %s: rebalance keeps tasks %s open, closes %s",
                    self.name,
                    sorted(self._parked),
                    sorted(closed),
                )
