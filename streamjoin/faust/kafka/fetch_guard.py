"""Records a fetch returns for partitions faust no longer delivers are read again.

faust's consumer fetches with its *live* set of active partitions: the fetch
waits (up to a second) in aiokafka, and a rebalance meanwhile pauses
partitions in that very set. aiokafka then returns records of partitions that
are no longer in it; with every partition paused (each rebalance pauses the
whole assignment until its tables are restored) the set is empty, which
aiokafka reads as "every partition". faust drops the records of partitions
that are not active when it iterates over the fetch, but aiokafka's position
has moved past them: the next fetch starts after them, faust takes the jump in
offsets for a gap it may commit over, and the records are lost to every agent
(measured in ``streamjoin demo`` runs: a repartition topic of the example's
campaign counts skipped 47 records, an outcome topic 11).

:func:`install_fetch_guard` registers a hook on the consumer's fetch chain
(:mod:`~streamjoin.faust.kafka.fetch_chain`): it fetches with a copy of the
active set taken when the fetch starts (none when it is empty), and seeks
every partition whose records faust would drop back to its first record, so
that it is fetched again once active.

Private attributes it depends on (faust-streaming 0.15.3):
``Consumer._get_active_partitions()`` and ``Consumer._buffered_partitions``
(through :mod:`~streamjoin.faust.kafka.consumer`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import TYPE_CHECKING

from aiokafka.errors import IllegalStateError

from streamjoin.faust.kafka.consumer import active_partitions, buffered_partitions
from streamjoin.faust.kafka.fetch_chain import GUARD, Fetch, Records, fetch_chain

if TYPE_CHECKING:
    from faust.types import TP, ConsumerT

__all__ = ["install_fetch_guard", "put_back"]

logger = logging.getLogger(__name__)


def install_fetch_guard(consumer: ConsumerT) -> bool:
    """Register the guard on *consumer*'s fetch chain; returns whether it was new."""

    async def guard(fetch: Fetch, active: Collection[TP] | None, timeout: float) -> Records:
        if active is None:  # a client-only app: every partition
            return await fetch(active, timeout)
        wanted = set(active)
        if not wanted:
            return {}  # aiokafka would read an empty set as every partition
        records = await fetch(wanted, timeout)
        if records:
            put = await put_back(consumer, records)
            if put:
                logger.info(
                    "fetch guard: %d partition(s) paused while the fetch waited, "
                    "read again from their first fetched record: %s",
                    len(put),
                    ", ".join(f"{tp.topic}[{tp.partition}]" for tp in put[:5]),
                )
        return records

    return fetch_chain(consumer).register("fetch-guard", GUARD, guard)


async def put_back(consumer: ConsumerT, records: Records) -> list[TP]:
    """Take the records faust would not deliver out of *records* (a fetch:
    TP -> records) and seek their partitions back to them; returns those
    partitions. faust delivers a partition that is active now, or one taken out
    of the active ones because a reader's buffer is full."""
    active = active_partitions(consumer)
    buffered = buffered_partitions(consumer)
    put = []
    for tp in sorted(records):
        if tp in active or tp in buffered:
            continue
        batch = records.pop(tp)
        if not batch:
            continue
        try:
            await consumer.seek(tp, batch[0].offset)
        except IllegalStateError:  # revoked meanwhile: its next owner reads it
            continue
        put.append(tp)
    return put
