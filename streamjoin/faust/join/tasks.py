"""The per-task runtime of a join: one partition of both topics on this worker.

A :class:`JoinTask` holds the task's RocksDB-backed :class:`BatchState`, its
policy logic, the records received and not applied yet (in arrival order:
the logic decides against the minimum of the two inputs' watermarks, so the
order in which the consumer fetched the two inputs does not matter; a batch
takes an input only in step by time with the other,
:mod:`~streamjoin.faust.join.alignment`), the
input position of each side (read from state when the task opens) and what
it needs to tell when an input is idle. A task whose partition stays on this
worker across a rebalance is *parked* (:meth:`JoinTask.park`) rather than
closed, and resumes without rebuilding its indexes when its database is the
one it left (:meth:`JoinTask.can_resume`). The task's state says where each
input resumes: a consumer that delivers an input from beyond that position
is sent back there (:meth:`JoinTask.rewind`). The records are applied by
:class:`~streamjoin.faust.join.router.RecordRouter`, which stages a task's
batch (:meth:`~streamjoin.faust.join.router.RecordRouter.stage`). Nothing here sends,
awaits or acks; the operator (:mod:`streamjoin.faust.join.operator`) makes
batches durable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from streamjoin.faust.join import alignment
from streamjoin.faust.join.batch_state import BatchState
from streamjoin.faust.join.types import SIDES, Chunk, InputRecord
from streamjoin.faust.kafka.session import last_fetch_ms
from streamjoin.join import keys
from streamjoin.join.activity import TaskActivity
from streamjoin.join.policy import JoinPolicy, TaskLogic
from streamjoin.restore.owner_tokens import OWNER_HEADER

if TYPE_CHECKING:
    from faust.types import ConsumerT
    from rocksdict import Rdict

__all__ = ["JoinTask", "highwater"]

#: times one input position is read again before a gap is accepted (see JoinTask.rewind)
MAX_REWINDS = 3
#: milliseconds after a rewind during which records beyond the position are dropped
REWIND_MS = 5_000


class JoinTask:
    """One partition of both topics on this worker."""

    def __init__(self, partition: int, policy: JoinPolicy, max_idle_ms: int) -> None:
        self.partition = partition
        self.state = BatchState()
        self.logic: TaskLogic | None = None
        self.policy = policy
        self.max_idle_ms = max_idle_ms
        #: records received and not applied yet, in arrival order
        self.inbox: list[Chunk] = []
        #: per side, the latest record timestamp received, and taken by a
        #: batch (see alignment)
        self.latest: dict[str, int | None] = dict.fromkeys(SIDES)
        self.taken: dict[str, int | None] = dict.fromkeys(SIDES)
        #: whether the last :meth:`take_inbox` left records only for its limit
        self.more = False
        #: next input offset to apply, per side (from state; None: unknown yet)
        self.position: dict[str, int | None] = dict.fromkeys(SIDES)
        #: next offset expected from the consumer, per side
        self.next_seen: dict[str, int | None] = dict.fromkeys(SIDES)
        #: wall time (monotonic ms) of the last record received, per side
        self.last_record_ms: dict[str, int] = dict.fromkeys(SIDES, 0)
        #: inputs the logic has been told are idle (until their next record)
        self.idle: set[str] = set()
        #: whether a record was received since the task opened or resumed
        self.heard = False
        #: per side, offsets (first, last) applied by the batch being made
        #: durable (acked as a range once it is)
        self.unacked_range: dict[str, tuple[int, int]] = {}
        #: where the input positions start in that batch's state changes
        self.positions_at = 0
        #: the changelog offset stored in the task's database when it was last
        #: live (set once per parking, see :meth:`mark_parked`); ``None``: not parked
        self.parked_at: tuple[bytes | None] | None = None
        #: per side: (position read again from, times, wall ms until which
        #: records beyond it are dropped) -- see :meth:`rewind`
        self.rewinds: dict[str, tuple[int, int, int]] = {}
        #: the owner token of the task's changelog partition this worker writes
        #: with (see streamjoin.restore.owner_tokens), and the headers carrying it
        self.token: bytes | None = None
        self.owner_headers: list[tuple[str, bytes]] | None = None
        #: records processed and stops since the task opened here (parked included)
        self.activity = TaskActivity()

    def own(self, token: bytes | None) -> None:
        """Write the task's changelog records with owner *token* (``None``: unfenced)."""
        self.token = token
        self.owner_headers = None if token is None else [(OWNER_HEADER, token)]

    def open(self, db: Rdict, now_ms: int) -> None:
        """Load the task from its (restored) database and rebuild its indexes.

        Idleness is not stored: an input counts as silent from *now_ms* on.
        """
        self.state.db = db
        self.logic = self.policy.task(self.state)
        self.logic.rebuild_indexes()
        for side in SIDES:
            raw = self.state.get(keys.position_key(side))
            self.position[side] = None if raw is None else int.from_bytes(raw, "big")
            self.next_seen[side] = self.position[side]
            self.last_record_ms[side] = now_ms

    def park(self) -> int:
        """Stop the task for a rebalance, keeping its state and indexes; returns
        the number of buffered records dropped.

        Buffered records were never applied: they are dropped unacknowledged,
        and the consumer delivers them again from the committed offset, which
        is never past :attr:`position`. Records it delivers again that were
        applied are below the position and skipped (:meth:`RecordRouter.apply`);
        :attr:`next_seen` goes back to the position so that a consumer starting
        beyond it is still noticed (:meth:`see`). A batch being made durable
        keeps its offsets in :attr:`unacked_range` and completes.
        """
        dropped = self.waiting
        self.take_inbox()
        for side in SIDES:
            self.next_seen[side] = self.position[side]
            self.latest[side] = self.taken[side] = None
        self.rewinds.clear()  # the rebalance seeks the consumer anew
        return dropped

    def mark_parked(self, db: Rdict, offset_key: bytes) -> None:
        """Remember the changelog offset in *db*, once, when no batch is in flight.

        Called at the first rebalance after the task was live (later rebalances
        that keep it parked leave the mark alone: a restore in between may have
        written someone else's changes into the database).
        """
        if self.parked_at is None:
            self.parked_at = (db.get(offset_key),)

    def can_resume(self, db: Rdict, offset_key: bytes) -> bool:
        """May the parked task go on with *db* (the partition's database now)?

        Only when it is the very handle the task used and its changelog offset
        is the one marked: otherwise the database was reopened or wiped, or a
        restore applied changes another worker made while this one was away,
        and the indexes in memory would not match the state.
        """
        mark = self.parked_at
        return mark is not None and db is self.state.db and (db.get(offset_key),) == mark

    def resume(self, now_ms: int) -> None:
        """Make a parked task live again, as :meth:`open` would leave it.

        Its inputs count as silent from *now_ms* (the rebalance paused them)
        and none is idle any more: the consumer started again from the
        committed offset, so an input must be seen caught up and silent again
        (a reopened task forgets idleness the same way: it is not stored).
        Making an input active never raises the decision time, so the logic
        emits nothing here.
        """
        self.parked_at = None
        self.heard = False
        logic = self.logic
        for side in sorted(self.idle):
            if logic is not None:
                logic.set_idle(side, False)
        self.idle.clear()
        for side in SIDES:
            self.last_record_ms[side] = now_ms

    def see(self, side: str, offset: int) -> int | None:
        """Note that the consumer delivered *offset* of *side*.

        Returns the task state's position when the consumer started beyond it
        (records in between were never applied to the state), else ``None``.
        """
        position = self.gap_before(side, offset)
        self.next_seen[side] = offset + 1
        return position

    def gap_before(self, side: str, offset: int) -> int | None:
        """The task state's position when records of *side* starting at *offset*
        would leave a gap (nothing since the position was received), else ``None``."""
        position = self.position[side]
        gap = position is not None and offset > position and self.next_seen[side] == position
        return position if gap else None

    def rewind(self, side: str, position: int, now_ms: int) -> bool:
        """Should *side* be read again from *position* (a gap was seen)?

        The task's state says where its input resumes, whatever the consumer
        did; so the input is read again from there, at most
        :data:`MAX_REWINDS` times for one position (the records may really be
        gone: a topic truncated by retention or deleted). For ``REWIND_MS``
        after each rewind, records beyond the position are dropped
        (:meth:`rewinding`): they were fetched before the consumer went back.
        """
        done = self.rewinds.get(side)
        times = done[1] if done is not None and done[0] == position else 0
        if times >= MAX_REWINDS:
            return False
        self.rewinds[side] = (position, times + 1, now_ms + REWIND_MS)
        return True

    def rewinding(self, side: str, offset: int, now_ms: int) -> bool:
        """Are records of *side* from *offset* on to be dropped (a rewind is under way)?

        Records at or before the position end the rewind: they are the ones
        read again.
        """
        pending = self.rewinds.get(side)
        if pending is None or now_ms >= pending[2]:
            return False
        if offset <= pending[0]:
            self.rewinds[side] = (pending[0], pending[1], 0)
            return False
        return True

    def receive(self, side: str, records: Sequence[InputRecord], now_ms: int) -> None:
        """Hold received records (offset order) until the next batch applies them.

        When this input was quiet (idle, nothing received since the task
        opened or resumed, or silent for ``max_idle_ms`` without having been
        found idle: no fetch or no batch could tell while the network was
        stalled or the session lease had run out), traffic is starting again,
        and the other inputs' records may be a moment behind on the broker
        (two topics are written one after the other, and a producer held up
        by a stalled network sends them when it heals): every other input's
        silence counts again from now, an idle one active again, so no
        decision is made on this input alone before the others had
        ``max_idle_ms`` to show up.
        """
        silent = now_ms - self.last_record_ms[side] >= self.max_idle_ms
        if side in self.idle or not self.heard or silent:
            self.heard = True
            self.wake(dict.fromkeys(SIDES, True), now_ms)
            for other in SIDES:
                self.last_record_ms[other] = now_ms
        self.inbox.append((side, records))
        self.next_seen[side] = records[-1].offset + 1
        ts, latest = alignment.timestamp(records[-1]), self.latest[side]
        if latest is None or ts > latest:
            self.latest[side] = ts
        self.last_record_ms[side] = now_ms

    @property
    def waiting(self) -> int:
        """The number of records in the inbox."""
        return sum(len(records) for _, records in self.inbox)

    def waiting_on(self, side: str) -> int:
        """The number of records of input *side* in the inbox."""
        return sum(len(records) for s, records in self.inbox if s == side)

    def take_inbox(
        self, limit: int | None = None, waits: Mapping[str, int] | None = None
    ) -> list[Chunk]:
        """The oldest records received and not applied yet, at most *limit* of
        them (``None``: all), an input of *waits* only up to its timestamp there
        (:func:`~streamjoin.faust.join.alignment.bounds`); the rest stay in the
        inbox, and :attr:`more` says whether the limit alone left some."""
        taken, self.inbox, self.more = alignment.take(self.inbox, limit, waits or {})
        for side, records in taken:
            ts, before = alignment.timestamp(records[-1]), self.taken[side]
            if before is None or ts > before:
                self.taken[side] = ts
        return taken

    def waits(self, consumer: ConsumerT, topics: Mapping[str, str], lead: int) -> dict[str, int]:
        """The input that must wait for the other, with the latest timestamp a
        batch may take of it (:mod:`~streamjoin.faust.join.alignment`): the other
        input must have records not taken yet (in the inbox, or behind its fetch
        high watermark and not idle)."""
        behind = {}  # (an input with records in the inbox is behind, below)
        for side in SIDES:
            behind[side] = self._behind(consumer, topics[side], side) and side not in self.idle
        heads: dict[str, int | None] = dict.fromkeys(SIDES)
        for side, records in reversed(self.inbox):
            heads[side] = alignment.timestamp(records[0])
            behind[side] = True
        return alignment.bounds(self.latest, self.taken, heads, behind, lead)

    def unread(
        self, consumer: ConsumerT, topics: Mapping[str, str], fresh_after: Mapping[str, float]
    ) -> dict[str, bool]:
        """Per side: may the consumer still have records of this task to deliver?

        Yes when its position is behind the fetch high watermark, and also when
        the high watermark is older than *fresh_after* (monotonic ms): no
        fetch response carried the partition since then (the process was
        frozen, the fetcher starved or its connection stalled), so the broker
        may well hold records the consumer does not know of.
        """
        unread = {}
        for side in SIDES:
            topic = topics[side]
            behind = self._behind(consumer, topic, side)
            if not behind:
                fetched = last_fetch_ms(consumer, topic, self.partition)
                behind = fetched is None or fetched < fresh_after[side]
            unread[side] = behind
        return unread

    def _behind(self, consumer: ConsumerT, topic: str, side: str) -> bool:
        """Whether the task has not received every record of *side* below the
        consumer's fetch high watermark (or that watermark is unknown)."""
        hw = highwater(consumer, topic, self.partition)
        seen = self.next_seen[side]
        return hw is None or (hw > 0 if seen is None else seen < hw)

    def going_idle(self, now_ms: int, consumer: ConsumerT, topics: Mapping[str, str]) -> list[str]:
        """The inputs that became idle: caught up with their partition (position
        at the fetch high watermark, from a fetch answered at least
        ``max_idle_ms`` after the input's last record and within the last
        ``max_idle_ms``) and without a record for ``max_idle_ms``. An idle
        input whose partition no fetch answered for within ``max_idle_ms`` is
        active again (:meth:`wake`): the consumer's high watermark is stale.

        Records still in the inbox (beyond what a batch takes) are records:
        their input is not idle, and its silence starts again after them.
        """
        for side, _ in self.inbox:
            self.last_record_ms[side] = now_ms
        # what the consumer knows of an input counts only if a fetch answered
        # for it within the last max_idle_ms (and, to start an input's
        # idleness, after it had been silent that long)
        recent = now_ms - self.max_idle_ms
        if self.idle:
            self.wake(self.unread(consumer, topics, dict.fromkeys(SIDES, recent)), now_ms)
        silent = [
            side
            for side in SIDES
            if side not in self.idle and now_ms - self.last_record_ms[side] >= self.max_idle_ms
        ]
        if not silent:
            return []
        after = {side: max(recent, self.last_record_ms[side] + self.max_idle_ms) for side in SIDES}
        unread = self.unread(consumer, topics, after)
        return [side for side in silent if not unread[side]]

    def wake(self, unread: Mapping[str, bool], now_ms: int) -> list[str]:
        """Make the idle inputs that have records to read again active; returns them.

        An idle input is one caught up with its partition: once the consumer
        knows of records of it that the task has not received (its high
        watermark moved past them), it no longer is, and decisions wait for
        those records instead of going on without them. Its silence counts
        again from *now_ms*. Making an input active never raises the
        decision time, so the logic emits nothing here.
        """
        woken = [side for side in SIDES if side in self.idle and unread[side]]
        for side in woken:
            self.idle.discard(side)
            if self.logic is not None:
                self.logic.set_idle(side, False)
            self.last_record_ms[side] = now_ms
        return woken


def highwater(consumer: ConsumerT, topic: str, partition: int) -> int | None:
    """The consumer's high watermark of ``topic[partition]``, ``None`` when unknown."""
    from faust.types import TP

    try:
        hw = consumer.highwater(TP(topic, partition))
    except (KeyError, AssertionError, AttributeError, TypeError):
        return None
    return None if hw is None else int(hw)
