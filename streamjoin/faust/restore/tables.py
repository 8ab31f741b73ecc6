"""``streamjoin:TableManager``: faust's table manager with streamjoin's restoration.

A plain faust app adopts it with one setting::

    app = faust.App("myapp", TableManager="streamjoin:TableManager", store="rocksdb://")

(:class:`streamjoin.App` sets it by default.) Everything else about tables,
including how agents write to them, stays faust's; only the recovery service
is replaced by :class:`streamjoin.faust.restore.restorer.Restorer`.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, cast

from faust.tables.manager import TableManager as _FaustTableManager

from streamjoin.faust.kafka.incremental import rebalance_kind
from streamjoin.faust.kafka.stores import open_dbs
from streamjoin.faust.restore.owner_tokens import TaskOwnership
from streamjoin.faust.restore.rebalance import RebalanceOwner, RebalanceParticipant
from streamjoin.faust.restore.restorer import Restorer
from streamjoin.lifecycle.rebalance import Assigned, RebalanceKind, Revoked

if TYPE_CHECKING:
    from faust.stores.rocksdb import Store as RocksDBStore
    from faust.types import TP

    from streamjoin.faust.kafka.stores import TableStore

logger = logging.getLogger(__name__)

__all__ = ["TableManager"]


class TableManager(_FaustTableManager):
    """Faust ``TableManager`` whose ``recovery`` is streamjoin's :class:`Restorer`."""

    @property
    def recovery(self) -> Restorer:  # type: ignore[override]
        """The restore service, created on first use in ``_recovery`` as faust's
        manager does (so one set there beforehand, e.g. by a test, is used)."""
        if self._recovery is None:
            restorer = Restorer(self.app, self, beacon=self.beacon, loop=self.loop)
            restorer.restore_again = self.rebalance.restore_again
            self._recovery = restorer  # type: ignore[assignment]
        return self._recovery  # type: ignore[return-value]

    @property
    def ownership(self) -> TaskOwnership:
        """This worker's owner tokens of fenced changelogs and its session lease."""
        owned = self.__dict__.get("_streamjoin_ownership")
        if owned is None:
            owned = self.__dict__["_streamjoin_ownership"] = TaskOwnership(self.app, self)
        return owned

    @property
    def rebalance(self) -> RebalanceOwner:
        """The owner of this worker's task lifecycle: every rebalance goes through it."""
        owner = self.__dict__.get("_streamjoin_rebalance")
        if owner is None:
            owner = self.__dict__["_streamjoin_rebalance"] = RebalanceOwner(self.ownership)
        return owner

    def register(self, participant: RebalanceParticipant) -> None:
        """Call *participant* (a join) at every rebalance: :class:`RebalanceOwner`.

        Its handover runs on faust's ``on_partitions_revoked`` signal, the
        revoke's last step (after faust waited for its agents and flushed the
        producer)."""
        owner = self.rebalance
        if not owner.participants:
            self.app.on_partitions_revoked.connect(owner.handover)
        owner.register(participant)

    def _kind(self) -> RebalanceKind:
        """How the rebalance under way goes (asked once per call from faust)."""
        return rebalance_kind(self.app)

    async def on_rebalance(
        self, assigned: set[TP], revoked: set[TP], newly_assigned: set[TP], generation_id: int = 0
    ) -> None:
        """The new assignment: the rebalance owner (ownership, then joins) first,
        then faust's manager tells the tables and the restorer."""
        event = Assigned(
            self._kind(),
            generation_id,
            frozenset(assigned),
            frozenset(revoked),
            frozenset(newly_assigned),
        )
        await self.rebalance.assign(event)
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)

    def on_partitions_revoked(self, revoked: set[TP]) -> None:
        """The rebalance owner stops what is revoked (every join drops what it
        holds but has not applied), then the restorer stops restoring.

        A join drops its buffered records unacknowledged (acknowledging them
        would let faust commit past the state's position); join apps run with
        ``stream_wait_empty`` off, so faust does not wait for them. Their
        task's state says where to resume: whoever runs the task next reads
        them again.
        """
        self.rebalance.revoke(Revoked(self._kind(), frozenset(revoked)))
        super().on_partitions_revoked(revoked)

    def standby_offsets(self) -> dict[tuple[str, int], int]:
        """Applied changelog offset of every standby partition assigned to this worker.

        Keys are ``(changelog topic, partition)``; a value is the offset of the
        last record applied (faust's persisted-offset convention).
        """
        return self.recovery.standby_offsets()

    def persisted_offsets(self) -> dict[tuple[str, int], int]:
        """Changelog offset of every table partition that has local state on disk.

        This covers partitions the worker is not assigned right now (for
        example after a restart), which is what a warm-first assignor needs.
        """
        out: dict[tuple[str, int], int] = {}
        for table in self.values():
            topic = table.changelog_topic.get_topic_name()
            for partition, offset in _store_offsets(table.data).items():
                out[(topic, partition)] = offset
        for key, offset in self.recovery.applied_offsets().items():
            out[key] = max(offset, out.get(key, offset))
        return dict(sorted(out.items()))

    def restored_at(self) -> dict[int, float]:
        """``time.time()`` at which each task (partition number) became ready this generation."""
        return self.recovery.restored_at()

    def restore_counts(self) -> dict[tuple[str, int], int]:
        """Records applied by the latest active restore of each changelog partition."""
        return self.recovery.restore_counts()

    def standby_pacing(self) -> dict[str, float]:
        """Share, records applied, busy seconds and seconds resting of the standby follower."""
        return self.recovery.standby_pacing()


def _store_offsets(store: TableStore) -> dict[int, int]:
    """Offsets persisted by a rocksdb store, per partition, without taking locks."""
    if not getattr(store, "use_rocksdict", False):
        return {}
    import rocksdict

    store = cast("RocksDBStore", store)  # only faust's rocksdb store has use_rocksdict

    offsets: dict[int, int] = {}
    for partition, db in open_dbs(store).items():
        raw = db.get(store.offset_key)
        if raw is not None:
            offsets[partition] = int(raw)
    base: Path = store.partition_path(0)
    pattern = re.compile(re.escape(base.name[: -len("-0.db")]) + r"-(\d+)\.db$")
    if not base.parent.is_dir():
        return offsets
    for path in sorted(base.parent.iterdir()):
        match = pattern.match(path.name)
        if match is None or int(match.group(1)) in offsets:
            continue
        try:
            db = rocksdict.Rdict(
                str(path),
                options=rocksdict.Options(raw_mode=True),
                access_type=rocksdict.AccessType.read_only(),
            )
            try:
                raw = db.get(store.offset_key)
            finally:
                db.close()
        except Exception as exc:  # rocksdict raises plain exceptions for every failure
            logger.warning(
                "streamjoin: cannot read the changelog offset in %s (%s); "
                "the assignor counts that partition as not held here",
                path,
                exc,
            )
            continue
        if raw is not None:
            offsets[int(match.group(1))] = int(raw)
    return offsets
