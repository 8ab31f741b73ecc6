"""This worker's ownership of its fenced changelog partitions, and the lease it holds it by.

The rules are in :mod:`streamjoin.restore.owner_tokens` (fence markers, owner
tokens, the restore filter) and :mod:`streamjoin.membership.lease` (the
session lease); this is the worker's side:

* :meth:`TaskOwnership.begin` runs first in every rebalance (before any
  table or join hears of it) and decides which partitions the worker kept
  without interruption; the others get a fresh token;
* :meth:`TaskOwnership.write_marker` writes the fence marker of a partition
  taken over once the restorer restored it to the end (the restorer then
  restores on up to the marker before the task starts);
* :meth:`TaskOwnership.may_write` and :meth:`TaskOwnership.token` are what a
  join checks before each durability step of a batch.

A table is fenced when it was declared with ``streamjoin_fenced = True`` (a
join's state table is): only fenced changelogs get markers and owner headers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from streamjoin.faust.kafka.session import app_aiokafka_consumer, install_lease
from streamjoin.membership.lease import SessionLease
from streamjoin.restore.owner_tokens import FENCE_HEADER, Owner, Ownership, fence_key, first_owner

if TYPE_CHECKING:
    from faust.types import TP, AppT, CollectionT
    from faust.types.tables import TableManagerT

__all__ = ["TaskOwnership", "is_fenced"]

logger = logging.getLogger(__name__)

#: seconds between checks while waiting for a lease before writing markers
_LEASE_POLL = 0.1


def is_fenced(table: CollectionT) -> bool:
    """Does *table*'s changelog carry owner tokens (a join's state table)?"""
    return bool(getattr(table, "streamjoin_fenced", False))


class TaskOwnership:
    """The worker's owner tokens and session lease (one per app, on its table manager)."""

    def __init__(self, app: AppT, tables: TableManagerT) -> None:
        self.app = app
        self.tables = tables
        self.lease = SessionLease(float(app.conf.broker_session_timeout))
        self.book: Ownership[TP] = Ownership(new_token=lambda: os.urandom(8))

    # -- the lease -------------------------------------------------------------------

    def install(self) -> None:
        """Keep the lease from the group coordinator's answers (call on the consumer's
        thread, before the member joins: the assignor's ``metadata`` does)."""
        aio = app_aiokafka_consumer(self.app)
        if aio is not None and install_lease(aio, self.lease):
            logger.info(
                "group session lease installed (session %.1f s, writes stop %.1f s "
                "before it could expire)",
                self.lease.session_timeout,
                self.lease.margin,
            )

    def may_write(self) -> bool:
        """Is the lease valid now (the group cannot have given the tasks away),
        and has a rebalance begun since the lease was last lost (the tokens
        say which tasks are still this worker's)?"""
        lease = self.lease
        return lease.valid(time.monotonic()) and lease.losses == self.book.losses

    # -- tokens --------------------------------------------------------------------------

    def fenced_topics(self) -> set[str]:
        """Changelog topics of the fenced tables."""
        return {
            table.changelog_topic.get_topic_name()
            for table in self.tables.values()
            if is_fenced(table)
        }

    def begin(self, generation_id: int) -> None:
        """A new assignment: keep the tokens of partitions owned without interruption."""
        # an app with another assignor than streamjoin's: the lease follows from
        # here on (renewed by the next heartbeat, within a second)
        self.install()
        fenced = self.fenced_topics()
        read = getattr(self.app.assignor, "assigned_actives", None)
        actives = read() if read is not None else set()
        owned = sorted(tp for tp in actives if tp.topic in fenced)
        kept = self.book.begin(generation_id, owned, self.lease.losses)
        if owned:
            logger.info(
                "ownership: generation %d keeps %d fenced changelog partition(s), "
                "takes over %d (fenced once restored)",
                generation_id,
                len(kept),
                len(self.book.pending),
            )

    def taken_over(self) -> set[TP]:
        """Fenced changelog partitions this worker takes over in this generation
        (their marker still to be written): restored again even when kept."""
        return set(self.book.pending)

    def token(self, topic: str, partition: int) -> bytes | None:
        """The token this worker writes ``topic[partition]`` with (``None``: not its own)."""
        from faust.types import TP

        return self.book.token(TP(topic, partition))

    def needs_marker(self, tp: TP, current: Owner | None) -> bool:
        """Must *tp* (restored to the end: *current* is the owner its log names
        now) be fenced (again) before its task starts?

        Once the owner restored is the one this worker's marker names, the
        token is this worker's and no marker is needed. A marker of another
        worker that landed between the end this worker restored to and its own
        marker (a takeover held back in a frozen worker's buffers) may carry the
        same epoch and win: then this worker marks again, one epoch above.
        """
        token = self.book.pending.get(tp)
        if token is None:
            return False
        if current is not None and current.token == token:
            self.book.marked(tp)
            logger.info(
                "ownership: %s[%d] fenced at epoch %d (owner %s)",
                tp.topic,
                tp.partition,
                current.epoch,
                token.hex(),
            )
            return False
        return True

    async def write_marker(
        self, tp: TP, current: Owner | None, stale: Callable[[], bool]
    ) -> int | None:
        """Write *tp*'s fence marker (restored to the end: *current* is the owner
        it names now) and wait for its acknowledgement; the restore goes on up
        to it, and the token is this worker's once the restored owner is it
        (:meth:`needs_marker`).

        Waits for a valid lease first: a worker thawed after its session
        expired writes no marker (its rebalance is stale). Returns the
        marker's offset, ``None`` when *stale()* became true meanwhile.
        """
        token = self.book.pending[tp]
        while not self.may_write():
            if stale():
                return None
            await asyncio.sleep(_LEASE_POLL)
        owner = first_owner(token) if current is None else current.successor(token)
        value = json.dumps(
            {"epoch": owner.epoch, "generation": self.book.generation, "owner": token.hex()}
        ).encode()
        fut = await self.app.producer.send(
            tp.topic, fence_key(token), value, tp.partition, None, [(FENCE_HEADER, owner.encode())]
        )
        meta = await fut
        return None if stale() else int(meta.offset)
