"""Table restoration that replaces faust's ``Recovery`` service.

One *restore session* runs per rebalance generation:

1. Stream partitions stay paused; the app's flow is resumed at once, and a
   task (partition number) with no table to restore starts immediately.
2. A dedicated consumer (no group, manual assignment) reads the active
   changelog partitions from the persisted offset + 1. Every fetch is applied
   per partition in one atomic store batch that also records the offset.
3. A changelog partition is restored when the consumer position reaches the
   larger of the latest fetch high watermark and the ``ListOffsets`` end
   offset. When all active changelog partitions of a task are restored, that
   task's stream partitions are resumed; nothing of a partition is processed
   before then.
4. After every active is restored, a second consumer (polling more lazily)
   applies the standby partitions until the next rebalance; their applied offsets
   are exposed by :meth:`Restorer.standby_offsets`. It also keeps following
   every partition of every global table's changelog (the assignor gives them
   to every member as actives): a global table on every worker gets every
   write, whichever worker or producer made it, within about a second
   (:attr:`RestoreSettings.standby_fetch_max_wait_ms`), for the whole
   generation; :meth:`Restorer.global_offsets` shows how far each is applied.
   While it catches up it rests between fetches, so that it takes at most
   :attr:`RestoreSettings.standby_share` of the time (half by default) and
   leaves the rest to the live tasks.

A persisted offset beyond the changelog's end (the topic was recreated or its
data deleted) wipes that partition's local state and restores it from the
beginning, with a warning.

This module holds the :class:`Restorer` service (faust's recovery protocol
and the session); the consumer and its fetch loops are in
:mod:`~streamjoin.faust.restore.fetch`, the per-partition bookkeeping and the
task gate in :mod:`~streamjoin.faust.restore.book`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from faust.types import TP
from mode import Service

from streamjoin._supervise import crash_on_failure
from streamjoin.faust.kafka.app import changelogs as table_changelogs
from streamjoin.faust.kafka.consumer import forget_offsets, start_fetcher
from streamjoin.faust.kafka.fetch_guard import install_fetch_guard
from streamjoin.faust.kafka.incremental import drop_queued, incremental, seek_to_committed
from streamjoin.faust.kafka.session import request_rebalance
from streamjoin.faust.restore.book import ChangelogBook, TaskGate
from streamjoin.faust.restore.fetch import ChangelogFetcher, RestoreSettings, restore_consumer
from streamjoin.faust.restore.kept import RestorePlan, named, plan_rebalance, task_key
from streamjoin.faust.restore.warmup_watch import WarmupWatch, reported_lag
from streamjoin.restore.throttle import RestoreThrottle

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer
    from faust.tables.manager import TableManager as FaustTableManager
    from faust.types import AppT, CollectionT

    from streamjoin.faust.restore.owner_tokens import TaskOwnership
    from streamjoin.membership.settings import MemberSettings

__all__ = ["RestoreSettings", "Restorer"]

logger = logging.getLogger(__name__)


class _WarmupAssignor(Protocol):
    """What the restorer reads of streamjoin's assignor beyond faust's ``PartitionAssignorT``
    (:class:`streamjoin.faust.assignment.assignor.PartitionAssignor`, a room it may not import)."""

    settings: MemberSettings


class _Marks:
    """Fence markers through the worker's ownership, naming the owner restored so far."""

    def __init__(
        self, ownership: TaskOwnership, book: ChangelogBook, stale: Callable[[], bool]
    ) -> None:
        self._ownership = ownership
        self._book = book
        self._stale = stale

    def needs_marker(self, tp: TP) -> bool:
        return bool(self._ownership.needs_marker(tp, self._book.writer(tp).owner(tp)))

    async def mark(self, tp: TP) -> int | None:
        current = self._book.writer(tp).owner(tp)
        offset: int | None = await self._ownership.write_marker(tp, current, self._stale)
        return offset


class Restorer(Service):
    """Restores a worker's tables from their changelogs after every rebalance.

    It implements what faust's ``TableManager`` needs of its ``recovery``
    attribute: ``on_partitions_revoked``, ``on_rebalance`` and the
    ``completed`` event set once the first restore of the active partitions
    has finished.
    """

    settings = RestoreSettings

    def __init__(self, app: AppT, tables: FaustTableManager, **kwargs: Any) -> None:
        # kwargs: mode's Service options (beacon, loop), passed on as they are
        self.app = app
        self.tables = tables
        self.completed = asyncio.Event()
        self._session: asyncio.Task[None] | None = None
        self._book = ChangelogBook(tables)
        self._active_tps: set[TP] = set()
        self._standby_tps: set[TP] = set()
        self._global_tps: set[TP] = set()
        self._restored_at: dict[int, float] = {}
        #: tasks the latest rebalance kept running (ready: see restore.kept)
        self._kept: set[tuple[int, int]] = set()
        self._generation: int | None = None
        self.warmups = WarmupWatch(lambda: request_rebalance(self.app))
        #: active changelog partitions to restore again though kept (the rebalance owner's)
        self.restore_again: Callable[[], set[TP]] = set
        # the app's restore settings (streamjoin worker --standby-share), else the class's
        configured = getattr(app.conf, "streamjoin_restore", None)
        if isinstance(configured, type) and issubclass(configured, RestoreSettings):
            self.settings = configured
        self._throttle = RestoreThrottle(self.settings.standby_share)
        super().__init__(**kwargs)

    # -- what the TableManager and the assignor read -------------------------

    def standby_offsets(self) -> dict[tuple[str, int], int]:
        """Last applied changelog offset of each standby partition assigned now.

        Only in-memory state is read, so the consumer thread (where an
        assignor builds its metadata) may call it; a standby appears once its
        session has read the persisted offset or applied a batch.
        """
        return self._applied(self._standby_tps)

    def global_offsets(self) -> dict[tuple[str, int], int]:
        """Last applied changelog offset of each global table partition followed now."""
        return self._applied(self._global_tps)

    def applied_offsets(self) -> dict[tuple[str, int], int]:
        """Last changelog offset applied by this process, per partition."""
        return self._applied(None)

    def _applied(self, tps: set[TP] | None) -> dict[tuple[str, int], int]:
        """Applied offsets of *tps* (``None``: all), copied in one step (threads read)."""
        applied = dict(self._book.applied)
        return {
            (tp.topic, tp.partition): offset
            for tp, offset in sorted(applied.items())
            if tps is None or tp in tps
        }

    def changelog_lags(self) -> dict[tuple[str, int], int | None]:
        """Records each followed partition (standby, warm-up, global table) is behind
        its changelog's end: high watermark - (applied offset + 1), from the
        fetches of this process; ``None`` until a fetch answered for it."""
        applied, highwater = dict(self._book.applied), dict(self._book.highwater)
        out: dict[tuple[str, int], int | None] = {}
        for tp in sorted(self._standby_tps | self._global_tps):
            hw, done = highwater.get(tp), applied.get(tp)
            key = (tp.topic, tp.partition)
            out[key] = None if hw is None else max(0, hw - (0 if done is None else done + 1))
        return out

    def _check_warmups(self) -> None:
        """After a fetch round: ask for the follow-up rebalance once the warm-ups caught up."""
        assignor = self.app.assignor
        read = getattr(assignor, "assigned_warmups", None)
        warmups = read() if read is not None else set()
        if not warmups:
            return
        applied, highwater = dict(self._book.applied), dict(self._book.highwater)
        tasks: dict[tuple[int, int], list[int | None]] = {}
        for tp in sorted(warmups):
            try:
                group = assignor.group_for_topic(tp.topic)
            except KeyError:
                continue
            lag = reported_lag(highwater.get(tp), applied.get(tp))
            tasks.setdefault((group, tp.partition), []).append(lag)
        # only streamjoin's assignor has assigned_warmups (read above)
        self.warmups.check(tasks, cast("_WarmupAssignor", assignor).settings.recovery_lag)

    def standby_pacing(self) -> dict[str, float]:
        """How the standby follower kept to its share of the time, since this process
        started: ``share``, records ``applied``, CPU seconds ``busy`` in the rounds that
        applied them and seconds ``resting``."""
        return self._throttle.totals()

    def restored_at(self) -> dict[int, float]:
        """Wall-clock time (``time.time()``) each task of this generation became ready."""
        return dict(self._restored_at)

    def restore_remaining(self) -> dict[tuple[str, int], int]:
        """Records each active changelog partition still has to restore (0: ready)."""
        return self._book.remaining(self._active_tps, set(self._restored_at))

    def restore_counts(self) -> dict[tuple[str, int], int]:
        """Records applied by the latest active restore of each changelog partition."""
        return {(tp.topic, tp.partition): n for tp, n in sorted(self._book.restore_counts.items())}

    # -- faust's recovery protocol ----------------------------------------------

    def on_partitions_revoked(self, revoked: set[TP]) -> None:
        """Stop the running session: no more writes for partitions we may lose."""
        if self._session is not None and not self._session.done():
            self._session.cancel()

    async def on_rebalance(
        self,
        assigned: set[TP],
        revoked: set[TP],
        newly_assigned: set[TP],
        generation_id: int = 0,
    ) -> None:
        """Start the restore session for generation *generation_id*: decide what
        is restored (:func:`~streamjoin.faust.restore.kept.plan_rebalance`),
        note it, and run it."""
        app = self.app
        install_fetch_guard(app.consumer)  # before the flow resumes (see fetch_guard)
        if generation_id != app.consumer_generation_id:
            logger.warning(
                "rebalance generation %s superseded by %s; waiting for the next one",
                generation_id,
                app.consumer_generation_id,
            )
            return
        changelogs = table_changelogs(self.tables)
        actives = {tp for tp in app.assignor.assigned_actives() if tp.topic in changelogs}
        standbys = {tp for tp in app.assignor.assigned_standbys() if tp.topic in changelogs}
        streams = {tp for tp in assigned if tp.topic not in changelogs}
        for tp in revoked:
            self._book.applied.pop(tp, None)
        plan = plan_rebalance(
            cooperative=incremental(app),
            actives=actives,
            streams=streams,
            added=newly_assigned,
            previous_actives=self._active_tps,
            ready=set(self._restored_at),
            kept_before=self._kept,
            again=self.restore_again(),
            task=task_key(app.assignor),
        )
        self._note(plan, actives, standbys, generation_id)
        previous = self._session
        if previous is not None and not previous.done():
            previous.cancel()
        if plan.reread:
            app.consumer.pause_partitions(set(plan.reread))
            drop_queued(app, set(plan.reread))
            forget_offsets(app.consumer, set(plan.reread))
        seek = None if plan.seek is None else set(plan.seek)
        self._session = asyncio.ensure_future(
            self._run_session(
                previous, generation_id, set(plan.restore), standbys, set(plan.waiting), seek
            )
        )

    def _note(self, plan: RestorePlan, actives: set[TP], standbys: set[TP], gen: int) -> None:
        """Remember the assignment and what stays ready; log what the plan keeps."""
        self._active_tps = actives
        self._standby_tps = standbys
        self._global_tps = {tp for tp in actives if self._is_global(tp)}
        self._kept = set(plan.kept)
        ready = plan.still_ready
        self._restored_at = {p: t for p, t in self._restored_at.items() if p in ready}
        self._generation = gen
        if plan.kept or plan.renewed:
            logger.info(
                "cooperative rebalance: task(s) %s keep running", named(plan.kept | plan.renewed)
            )
        if plan.renewed:
            logger.info("cooperative rebalance: task(s) %s restored again", named(plan.renewed))

    async def on_stop(self) -> None:
        """Cancel the running session and wait for its consumer to close."""
        session = self._session
        if session is not None and not session.done():
            session.cancel()
            await asyncio.wait([session], timeout=10)

    # -- the session ----------------------------------------------------------------

    def _stale(self, generation_id: int) -> bool:
        return bool(self.should_stop or self.app.consumer_generation_id != generation_id)

    async def _run_session(
        self,
        previous: asyncio.Task[None] | None,
        generation_id: int,
        actives: set[TP],
        standbys: set[TP],
        streams: set[TP],
        seek: set[TP] | None,
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        await crash_on_failure(
            self._session_body(generation_id, actives, standbys, streams, seek),
            what="table restoration",
            crash=self.crash,
            logger=logger,
        )

    async def _session_body(
        self,
        generation_id: int,
        actives: set[TP],
        standbys: set[TP],
        streams: set[TP],
        seek: set[TP] | None,
    ) -> None:
        """Resume the app, restore the actives (tasks start as they are ready), tail standbys.

        *actives* and *streams* are those of the tasks to restore and start
        (after a cooperative rebalance, not the kept ones); *seek* the stream
        partitions to seek to their committed offsets (``None``: all).
        """
        global_tps = {tp for tp in self._active_tps if self._is_global(tp)}
        gate = await self._resume_app(generation_id, global_tps, actives, streams, seek)
        if gate is None:
            return
        if actives:
            async with restore_consumer(
                self.app.conf, self.settings, self.settings.fetch_max_wait_ms
            ) as rc:
                restored = await self._fetcher(rc, generation_id).restore_actives(actives, gate)
            if not restored:
                return
        await self._on_actives_restored(actives, standbys)
        # global tables are written by every worker: keep applying their changelogs
        followed = standbys | global_tps
        if followed and not self._stale(generation_id):
            async with restore_consumer(
                self.app.conf, self.settings, self.settings.standby_fetch_max_wait_ms, tailing=True
            ) as rc:
                await self._fetcher(rc, generation_id).tail_standbys(
                    followed, self._check_warmups, self._throttle
                )

    async def _resume_app(
        self,
        generation_id: int,
        global_tps: set[TP],
        actives: set[TP],
        streams: set[TP],
        seek: set[TP] | None,
    ) -> TaskGate | None:
        """Let the app's flow go on, stream partitions still paused; ``None`` if stale.

        Returns the gate that resumes each task's stream partitions, after
        resuming those of every task with no active changelog partition.
        """
        app = self.app
        consumer = app.consumer
        timeout = app.conf.broker_request_timeout
        await app.on_rebalance_complete.send()
        if seek is not None:
            # a cooperative rebalance: only the partitions added are sought
            await asyncio.wait_for(seek_to_committed(consumer, seek), timeout=timeout)
        elif consumer.assignment():
            await asyncio.wait_for(consumer.perform_seek(), timeout=timeout)
        else:
            # nothing assigned (e.g. the group's topics do not exist yet): the
            # consumer has nothing to seek (aiokafka would refuse), the app idles
            logger.info("resuming with an empty assignment")
        if self._stale(generation_id):
            return None
        if not app.flow_control.is_active():
            # resume() also empties every stream buffer: right for an eager
            # rebalance (what was revoked is read again from its committed
            # offset); after a cooperative one the flow never stopped and the
            # buffers hold records of kept partitions, which are not read again
            app.flow_control.resume()
        consumer.resume_flow()
        await start_fetcher(app)

        global_partitions = {tp.partition for tp in global_tps & actives}
        gate = TaskGate(consumer, streams, global_partitions, self._restored_at)
        gate.update(pending={tp.partition for tp in actives})
        return gate

    def _is_global(self, tp: TP) -> bool:
        return bool(getattr(self._book.table_for(tp), "is_global", False))

    def _fetcher(self, rc: AIOKafkaConsumer, generation_id: int) -> ChangelogFetcher:
        def stale() -> bool:
            return self._stale(generation_id)

        # streamjoin's TableManager has it, another table manager not
        ownership: TaskOwnership | None = getattr(self.tables, "ownership", None)
        marks = None if ownership is None else _Marks(ownership, self._book, stale)
        return ChangelogFetcher(rc, self._book, self.settings, stale, marks)

    async def _on_actives_restored(self, actives: set[TP], standbys: set[TP]) -> None:
        app = self.app
        by_table: dict[CollectionT, tuple[set[TP], set[TP]]] = {}
        for table in self.tables.values():
            by_table[table] = (set(), set())
        for tp in actives:
            by_table[self._book.table_for(tp)][0].add(tp)
        for tp in standbys:
            by_table[self._book.table_for(tp)][1].add(tp)
        for table, (table_actives, table_standbys) in by_table.items():
            await table.on_recovery_completed(table_actives, table_standbys)
        self.completed.set()
        self.tables.on_actives_ready()
        self.tables.on_standbys_ready()
        app.on_rebalance_end()
        logger.info("tables restored: %d active changelog partition(s)", len(actives))
