"""A join's tasks on this worker across rebalances: the task registry.

It is long because it is the one place where a task's state changes: the state
machine's every edge is a method here, beside the queries it is checked by.

Every task has a state (:class:`~streamjoin.lifecycle.states.TaskState`) and
changes it only through the registry's named methods, each change checked
against the state machine drawn in :mod:`streamjoin.lifecycle.states`
(an invalid change raises with the task and both states). Queries
(:meth:`TaskRegistry.owned`, :meth:`TaskRegistry.abandoned`, ...) change
nothing.

In a rebalance that revokes everything (eager, or the membership lost) every
running task is *parked* at the revoke (its buffered records dropped
unacknowledged) and goes on with its open state and indexes if the next
assignment keeps it; the tasks that left are closed. In a cooperative one
(:mod:`streamjoin.faust.kafka.incremental`) only the tasks given up are
*revoked* (parked, then closed at the assignment); the others keep running,
untouched. The task of every assigned partition is opened (or resumed) as
soon as its tables are restored, even before its next record: a task whose
inputs saw their last records before the rebalance still has decisions to
let out once its inputs go idle. The registry hears of rebalances from the
join (:class:`~streamjoin.faust.join.operator.Join`), which the worker's
rebalance owner (:mod:`streamjoin.faust.restore.rebalance`) calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from streamjoin.faust.join.stats import JoinStats
from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.join.types import JoinConfig
from streamjoin.faust.restore.owner_tokens import TaskOwnership
from streamjoin.join.policy import JoinPolicy
from streamjoin.lifecycle.states import TaskState, check

if TYPE_CHECKING:
    from rocksdict import Rdict

__all__ = ["HANDOVER_SHARE", "TaskRegistry", "now_ms"]

#: share of the session timeout a revoke waits for the batch in flight
HANDOVER_SHARE = 0.5

logger = logging.getLogger(__name__)

_S = TaskState


def now_ms() -> int:
    """Wall time for idleness (monotonic milliseconds)."""
    return int(time.monotonic() * 1000)


class TaskRegistry:
    """A join's tasks on this worker and the state of each (see the module docstring).

    The operator holds one and drives it: it opens tasks as their tables are
    restored; the join's rebalance calls park or revoke them
    (:meth:`revoke`), wait for the batch in flight (:meth:`handover`) and
    close the ones that left at the next assignment (:meth:`assign`); it says
    whether a batch may be made durable (the worker owns its tasks) and
    drops the tasks of a batch that may not (:meth:`abandon`).

    Args:
        config: the join's configuration.
        policy: the join's policy (each task's logic).
        stats: the join's counters.
        lock: held while a batch is made durable.
        open_db: partition -> its RocksDB database (opened on first use).
        offset_key: the key under which a database stores its changelog offset.
        ownership: the worker's task ownership (``None``: unfenced tables).
        restored_at: partition -> when its tables were last restored (``None``:
            not streamjoin's table manager).
        session_timeout: the group session timeout, in seconds.
        rejoin: makes the worker's consumer rejoin its group.

    Attributes:
        assigned: the partitions assigned at the last rebalance.
        revoking: whether partitions are being revoked (no records accepted).
        epoch: bumped when a revoke stops waiting for the batch in flight
            (a batch begun before it is not made durable after it).
        buffered: records received and not yet in a batch.
    """

    def __init__(
        self,
        config: JoinConfig,
        policy: JoinPolicy,
        stats: JoinStats,
        lock: asyncio.Lock,
        *,
        open_db: Callable[[int], Rdict],
        offset_key: Callable[[], bytes],
        ownership: Callable[[], TaskOwnership | None],
        restored_at: Callable[[], Mapping[int, float]] | None,
        session_timeout: Callable[[], float],
        rejoin: Callable[[], object],
    ) -> None:
        self.config = config
        self.policy = policy
        self.stats = stats
        self.lock = lock
        self._open_db = open_db
        self._offset_key = offset_key
        self._ownership = ownership
        self._restored_at = restored_at
        self._session_timeout = session_timeout
        self._rejoin = rejoin
        #: partition -> its task's state (CLOSED tasks are forgotten)
        self._states: dict[int, TaskState] = {}
        #: the tasks RUNNING, and the ones PARKED or REVOKED (kept open until the
        #: next assignment), by partition
        self._live: dict[int, JoinTask] = {}
        self._parked: dict[int, JoinTask] = {}
        #: partition -> time.time() its batch was abandoned, while it is ABANDONED
        self._abandoned_at: dict[int, float] = {}
        self.assigned: frozenset[int] = frozenset()
        self.revoking = False
        self.epoch = 0
        self.buffered = 0
        #: whether the lapse of the session lease was logged (once per lapse)
        self._lapse_logged = False
        #: whether the revoke under way hands tasks over (the batch in flight
        #: must be durable before the member rejoins)
        self._handover = False
        #: epoch -> the partitions handed over without waiting when it began
        #: (``None``: every partition, a rebalance that revokes everything)
        self._handed_over: dict[int, frozenset[int] | None] = {}

    # -- the registry: every change of a task's state ---------------------------------

    @property
    def live(self) -> Mapping[int, JoinTask]:
        """Partition -> its RUNNING task."""
        return self._live

    @property
    def parked(self) -> Mapping[int, JoinTask]:
        """Partition -> its task kept open across the rebalance under way (PARKED
        or REVOKED)."""
        return self._parked

    def state(self, partition: int) -> TaskState:
        """The state of *partition*'s task (CLOSED: none here)."""
        return self._states.get(partition, _S.CLOSED)

    def states(self) -> dict[int, TaskState]:
        """Partition -> its task's state, for every task not CLOSED, in partition order."""
        return dict(sorted(self._states.items()))

    def _move(self, partition: int, after: TaskState) -> None:
        """Change *partition*'s task to *after*, checked against the state machine
        (a task not in the registry counts as RESTORING: assigned, not open)."""
        before = self._states.get(partition, _S.RESTORING)
        if partition in self._states or after is not _S.RESTORING:
            check(f"{self.config.name}/{partition}", before, after)
        if after is not _S.ABANDONED:  # the abandon's time matters while it lasts
            self._abandoned_at.pop(partition, None)
        if after is _S.CLOSED:
            self._states.pop(partition, None)
        else:
            self._states[partition] = after

    def _close(self, partition: int) -> int:
        """CLOSE *partition*'s task: its open state is dropped (a batch of it, if
        any, is not in flight); returns its buffered records, dropped."""
        self._move(partition, _S.CLOSED)
        dropped = 0
        for tasks in (self._live, self._parked):
            task = tasks.pop(partition, None)
            if task is not None:
                dropped += task.waiting
                task.state.detach()
        return dropped

    def waiting(self) -> int:
        """Records received and not yet in a batch, over every live task."""
        return sum(task.waiting for task in self.live.values())

    def waiting_in(self, side: str, partition: int) -> int:
        """Records of input *side* received and not yet in a batch in *partition*'s
        live task."""
        task = self._live.get(partition)
        return 0 if task is None else task.waiting_on(side)

    # -- ownership: batches are made durable only by the tasks' owner ---------------

    def may_write(self) -> bool:
        """Is the worker's session lease valid (logged once when it runs out)?"""
        ownership = self._ownership()
        if ownership is None or ownership.may_write():
            self._lapse_logged = False
            return True
        if not self._lapse_logged:
            self._lapse_logged = True
            self.stats.lease_lapses += 1
            logger.warning(
                "join %s: the group session lease ran out (no request renewed the "
                "session for %.1f s); no batch runs until the coordinator answers again "
                "or the worker has rejoined",
                self.config.name,
                ownership.lease.session_timeout - ownership.lease.margin,
            )
        return False

    def still_owned(self, epoch: int, touched: list[JoinTask], whole: bool) -> list[JoinTask]:
        """Which tasks of the batch begun in *epoch* may go on to its next
        durability step?

        None once the session lease ran out (the group may have given them
        away) or an eager revoke stopped waiting for the batch (its tasks are
        being handed over, see :meth:`handover`); otherwise the tasks whose
        owner token is still current and that no cooperative revoke handed
        over without waiting, or none of them when one is not and the batch
        goes on only *whole* (before its outputs are sent). The tasks that may not
        are dropped (:meth:`abandon`): nothing more of the batch is sent,
        written to RocksDB or acked for them, and they open again from their
        restored state. What the batch sent for them already is a prefix of a
        batch, as after a crash; what reaches the changelog after another
        owner's fence marker is skipped by whoever restores it.
        """
        ownership = self._ownership()
        if ownership is None:
            return touched
        handed = [self._handed_over.get(e) for e in range(epoch + 1, self.epoch + 1)]
        if not ownership.may_write():
            reason, lost = "the group session lease ran out", touched
        elif None in handed:
            reason, lost = "the handover of its tasks did not wait for it", touched
        else:
            # a cooperative handover that did not wait took only its own tasks
            gone = {p for partitions in handed if partitions is not None for p in partitions}
            topic = self.config.changelog_topic
            lost = [
                t
                for t in touched
                if t.partition in gone or ownership.token(topic, t.partition) != t.token
            ]
            if not lost:
                return touched
            reason = f"task(s) {[t.partition for t in lost]} are no longer owned here"
            if whole:
                lost = touched
        going_on = [t for t in touched if t not in lost]
        self.abandon(lost, reason, going_on)
        if self.epoch == epoch:
            self._rejoin()  # make sure of the membership: rejoin
        return going_on

    def abandon(self, dropped: list[JoinTask], reason: str, going_on: list[JoinTask]) -> None:
        """ABANDON the tasks of a batch that may not go on: unacked, opened again
        from their state (*going_on*: the batch's tasks that complete it)."""
        now = time.time()
        for task in dropped:
            partition = task.partition
            for tasks in (self._live, self._parked):
                if tasks.get(partition) is task:
                    del tasks[partition]
            task.unacked_range.clear()
            task.state.detach()
            state = self.state(partition)
            if state is _S.CLOSED:
                continue
            if state is not _S.ABANDONED:
                self._move(partition, _S.ABANDONED)
            # what the batch sent may be in the changelog: the task opens again
            # only from a state restored after this (the next rebalance's)
            self._abandoned_at[partition] = now
        self.buffered = self.waiting()
        self.stats.batches_abandoned += 1
        logger.warning(
            "join %s: batch abandoned before it was durable (%s): tasks %s are dropped "
            "unacked and open again from their restored state%s",
            self.config.name,
            reason,
            sorted(t.partition for t in dropped),
            f"; tasks {sorted(t.partition for t in going_on)} complete it" if going_on else "",
        )

    def open_ready(self) -> None:
        """Open (or resume) the task of every assigned partition whose tables are
        restored, without waiting for its next record: a task whose inputs saw
        their last records before the rebalance still has decisions to let out
        once its inputs go idle."""
        if self.revoking or not self.assigned:
            return
        if self._restored_at is None:
            return
        done = self._restored_at()
        for partition in sorted(self.assigned):
            if partition in done and partition not in self._live and self.owned(partition):
                self.task(partition)

    def abandoned(self) -> set[int]:
        """Tasks ABANDONED whose state was not restored since (they do not open
        until it is: :meth:`owned`)."""
        return {p for p, at in self._abandoned_at.items() if not self._restored_after(p, at)}

    def _restored_after(self, partition: int, moment: float) -> bool:
        """Was *partition*'s state restored after *moment* (``time.time()``)?"""
        restored = None if self._restored_at is None else self._restored_at().get(partition)
        return restored is not None and restored > moment

    def token(self, partition: int) -> bytes | None:
        """The owner token this worker writes *partition*'s changelog with."""
        ownership = self._ownership()
        if ownership is None:
            return None
        return ownership.token(self.config.changelog_topic, partition)

    def owned(self, partition: int) -> bool:
        """May this worker run *partition*'s task now? Not when it is REVOKED, nor
        ABANDONED and not restored since; otherwise when its changelog is fenced
        for this worker (or the tables are not fenced)."""
        state = self.state(partition)
        if state is _S.REVOKED:
            return False
        if state is _S.ABANDONED:
            at = self._abandoned_at.get(partition)
            if at is not None and not self._restored_after(partition, at):
                return False
        return self._ownership() is None or self.token(partition) is not None

    def task(self, partition: int) -> JoinTask:
        """The RUNNING task of *partition*: the one parked across the rebalance when
        it may go on, else a new one opened from its database (call it only
        when :meth:`owned`)."""
        task = self._live.get(partition)
        if task is not None:
            return task
        self._move(partition, _S.RUNNING)
        db = self._open_db(partition)
        token = self.token(partition)
        parked = self._parked.pop(partition, None)
        if (
            parked is not None
            and parked.token == token
            and parked.can_resume(db, self._offset_key())
        ):
            parked.resume(now_ms())
            self.stats.tasks_kept += 1
            self._live[partition] = parked
            logger.info("join %s: task %d goes on where it was (kept)", self.config.name, partition)
            return parked
        if parked is not None:  # its database changed under it: start over from the state
            parked.state.detach()
        started = time.monotonic()
        task = self._live[partition] = JoinTask(partition, self.policy, self.config.max_idle_ms)
        task.own(token)
        task.open(db, now_ms())
        self.stats.tasks_opened += 1
        logger.info(
            "join %s: task %d opened%s, indexes rebuilt from RocksDB in %.3f s",
            self.config.name,
            partition,
            " again (its database changed while parked)" if parked is not None else "",
            time.monotonic() - started,
        )
        return task

    # -- rebalances (called by the join, in the rebalance owner's order) ----------------

    def revoke(self, partitions: set[int] | None) -> None:
        """Partitions are being revoked (a rebalance or a shutdown): drop buffered records.

        They are dropped unacknowledged, so faust does not commit them (the
        join sets ``stream_wait_empty`` off: faust does not wait for them
        either); whoever runs the task next reads them again from the
        committed offset, which is never past the task state's position.

        *partitions* ``None`` (every partition is revoked, then the new
        assignment comes): every RUNNING task is PARKED, not closed; the ones
        that stay here go on with their state and indexes, the others are
        closed by :meth:`assign`; tasks not open yet (RESTORING) are closed.
        Otherwise (a cooperative rebalance) only the tasks of *partitions* are
        REVOKED (closed by :meth:`assign`) and no record of them is accepted
        until then; every other task keeps running. A batch already being
        made durable completes.
        """
        if partitions is None:
            self.revoking = True
            self._handover = True
            self.buffered = 0
            for partition in sorted(self._live):
                self._move(partition, _S.PARKED)
                task = self._live.pop(partition)
                task.park()
                self._parked[partition] = task
            for partition, state in sorted(self._states.items()):
                if state is _S.RESTORING:
                    self._move(partition, _S.CLOSED)
            return
        self._handover = bool(partitions)
        for partition in sorted(partitions):
            if partition in self._states and self._states[partition] is not _S.REVOKED:
                self._move(partition, _S.REVOKED)
            if partition in self._live:
                task = self._live.pop(partition)
                task.park()
                self._parked[partition] = task
        self.buffered = self.waiting()

    async def handover(self) -> None:
        """A clean handover, once the revoke's other steps are done: waits until
        the batch being made durable is (its records acknowledged, RocksDB
        written, its input acked), so that the member rejoins (and the tasks'
        next owners restore) only after every write of it is on the broker. A
        batch that is not durable within the handover bound drops the tasks
        handed over at its next step (every task, when everything is revoked),
        see :meth:`still_owned`.
        """
        if not self._handover:
            return  # a cooperative rebalance that gives none of the join's tasks up
        bound = HANDOVER_SHARE * self._session_timeout()
        try:
            await asyncio.wait_for(self.lock.acquire(), bound)
        except TimeoutError:
            self.epoch += 1
            given_up = frozenset(p for p, s in self._states.items() if s is _S.REVOKED)
            self._handed_over[self.epoch] = None if self.revoking else given_up
            logger.warning(
                "join %s: the batch in flight is not durable after %.1f s; the "
                "partitions are handed over without it (it drops their tasks)",
                self.config.name,
                bound,
            )
            return
        self.lock.release()

    async def assign(self, assigned: set[int]) -> None:
        """The new assignment (*assigned*: the join's partitions) is known: close
        the tasks that left, accept records again.

        A task goes on only where this worker kept it without interruption
        (the same owner token): after a session loss, or a generation it
        missed, another worker may have run it meanwhile. A PARKED task of a
        partition still ours notes its database's changelog offset (no batch
        is in flight under the lock); it resumes on its next record if the
        offset is unchanged then (:meth:`task`).
        """
        self.revoking = False
        self._handover = False
        async with self.lock:
            # no batch begun before now is in flight any more (it held the lock)
            self._handed_over.clear()
            self.assigned = frozenset(assigned)
            closed = self._close_gone(self.assigned)
            for partition in sorted(self.assigned - set(self._states)):
                self._move(partition, _S.RESTORING)
            offset_key = self._offset_key()
            for _, task in sorted(self._parked.items()):
                if task.state.db is not None:
                    task.mark_parked(task.state.db, offset_key)
            # live now: kept running through a cooperative rebalance
            self.stats.tasks_kept += len(self._live)
            kept = sorted(set(self._parked) | set(self._live))
            if closed or kept:
                logger.info(
                    "join %s: rebalance keeps tasks %s open, closes %s",
                    self.config.name,
                    kept,
                    closed,
                )

    def _close_gone(self, keep: frozenset[int]) -> list[int]:
        """Close every task not in *keep* or whose owner token changed, and bring
        a REVOKED one that is kept back to PARKED; returns the partitions
        whose open task was closed."""
        closed = []
        for partition, state in sorted(self._states.items()):
            task = self._live.get(partition) or self._parked.get(partition)
            changed = task is not None and task.token != self.token(partition)
            if partition not in keep or changed:
                self.buffered -= self._close(partition)
                if task is not None:
                    closed.append(partition)
            elif state is _S.REVOKED:
                self._move(partition, _S.PARKED if task is not None else _S.CLOSED)
        return closed
