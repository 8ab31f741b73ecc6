"""The fetch guard: no record reaches faust for a partition faust would drop it for.

A fake stands for faust's consumer (only the attributes the guard reads) and
its fetch models aiokafka's ``fetched_records``: records of the partitions
asked for, of every partition when asked for none. The race it guards against
(a rebalance pausing partitions while a fetch waits) was seen in real
``streamjoin demo`` runs; ``tests/e2e/test_demo.py`` runs the whole pipeline.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.errors import IllegalStateError
from faust.types import TP

from streamjoin.faust.join.types import Fetched
from streamjoin.faust.kafka.fetch_guard import install_fetch_guard

A, B, C = TP("clicks", 0), TP("clicks", 1), TP("outcomes", 0)


def _records(tp: TP, first: int, n: int) -> list[Fetched]:
    return [Fetched(tp.topic, tp.partition, o, b"k", b"v", 0) for o in range(first, first + n)]


class _Consumer:
    def __init__(self, active: set[TP], buffered: dict[TP, list[Fetched]]) -> None:
        self._active_partitions = set(active)
        self._buffered_partitions: set[TP] = set()
        self.buffered = buffered  # what aiokafka holds, per partition
        #: the very objects each fetch was given
        self.asked: list[Any] = []
        self.sought: list[tuple[TP, int]] = []
        self.assigned = {A, B, C}
        #: called while the fetch waits (a rebalance meanwhile)
        self.meanwhile: Any = None

    def _get_active_partitions(self) -> set[TP]:
        return self._active_partitions

    async def seek(self, tp: TP, offset: int) -> None:
        if tp not in self.assigned:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        self.sought.append((tp, offset))

    async def _getmany(self, active_partitions: Any, timeout: float) -> Any:
        asked = active_partitions
        self.asked.append(asked)
        if self.meanwhile is not None:
            self.meanwhile(self)
        # aiokafka: an empty (or no) partition list means every partition
        return {tp: r for tp, r in self.buffered.items() if not asked or tp in asked}


def _fetch(consumer: _Consumer, active: Any) -> Any:
    install_fetch_guard(consumer)
    return asyncio.run(consumer._getmany(active, 1.0))


def test_partitions_paused_while_the_fetch_waits_are_sought_back_not_dropped() -> None:
    consumer = _Consumer({A, B, C}, {A: _records(A, 10, 3), B: _records(B, 5, 2)})

    def rebalance(c: _Consumer) -> None:
        c._active_partitions.clear()  # faust pauses the whole assignment, in place
        c._active_partitions.add(A)  # and resumes what is ready

    consumer.meanwhile = rebalance
    fetch = _fetch(consumer, consumer._active_partitions)
    assert set(fetch) == {A}
    assert consumer.sought == [(B, 5)]  # fetched again from its first record once active


def test_a_fetch_whose_set_empties_meanwhile_asks_only_for_what_was_active() -> None:
    consumer = _Consumer({A}, {A: _records(A, 0, 2), B: _records(B, 0, 4), C: _records(C, 7, 1)})
    consumer.meanwhile = lambda c: c._active_partitions.clear()
    fetch = _fetch(consumer, consumer._active_partitions)
    # the fetch asked for a copy: B and C stay in aiokafka's buffer, untouched
    assert consumer.asked == [{A}]
    assert fetch == {} and consumer.sought == [(A, 0)]


def test_no_fetch_with_no_active_partition() -> None:
    consumer = _Consumer(set(), {A: _records(A, 0, 2)})
    assert _fetch(consumer, consumer._active_partitions) == {}
    assert consumer.asked == []  # aiokafka would have drained every partition


def test_buffered_partitions_are_delivered_and_client_only_apps_fetch_everything() -> None:
    consumer = _Consumer({A}, {A: _records(A, 0, 1), B: _records(B, 0, 1)})
    consumer._buffered_partitions.add(B)  # a reader's buffer is full: faust delivers it
    consumer.meanwhile = lambda c: c._active_partitions.discard(B)
    assert set(_fetch(consumer, {A, B})) == {A, B}
    assert set(asyncio.run(consumer._getmany(None, 1.0))) == {A, B}


def test_a_partition_revoked_meanwhile_is_dropped_and_the_guard_installs_once() -> None:
    consumer = _Consumer({A, C}, {A: _records(A, 0, 1), C: _records(C, 3, 1)})

    def revoke(c: _Consumer) -> None:
        c._active_partitions.discard(C)
        c.assigned.discard(C)

    consumer.meanwhile = revoke
    assert set(_fetch(consumer, consumer._active_partitions)) == {A}
    assert consumer.sought == []
    wrapped = consumer._getmany
    assert install_fetch_guard(consumer) is False and consumer._getmany is wrapped
    assert wrapped.names() == ["fetch-guard"]


def test_the_guard_passes_a_copy_never_faust_s_live_set() -> None:
    consumer = _Consumer({A}, {})
    _fetch(consumer, consumer._active_partitions)
    assert len(consumer.asked) == 1
    assert consumer.asked[0] == {A} and consumer.asked[0] is not consumer._active_partitions
