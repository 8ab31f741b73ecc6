"""One hook chain on faust's consumer fetch: the only wrapper of ``Consumer._getmany``.

faust's fetcher awaits ``consumer._getmany(active_partitions, timeout)`` for
every fetch. streamjoin needs to act on that call in two places: the fetch
guard (:mod:`~streamjoin.faust.kafka.fetch_guard`) narrows what is fetched and
seeks back what faust would drop, and a join's intake
(:mod:`streamjoin.faust.join.intake`) takes its records out of the fetch.
Each registers a hook here under a name and a rank; the consumer's
``_getmany`` is replaced once, by the chain, which calls the hooks around the
original fetch, the lowest rank nearest the broker. Registering a name again
replaces that hook, so every rebalance may register without stacking
wrappers.

Private attribute it depends on (faust-streaming 0.15.3): ``Consumer._getmany``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, TypeAlias, cast

if TYPE_CHECKING:
    from aiokafka import ConsumerRecord
    from faust.transport.consumer import Consumer
    from faust.types import TP, ConsumerT

__all__ = ["GUARD", "INTAKE", "FetchChain", "Records", "fetch_chain"]

#: what a fetch returns: TP -> its records (aiokafka ``ConsumerRecord``\ s of raw
#: bytes); a dict, as aiokafka builds it (hooks take records out of it)
Records: TypeAlias = "dict[TP, list[ConsumerRecord[bytes, bytes]]]"
#: a fetch: (active partitions or None for every partition, timeout) -> TP -> records
Fetch: TypeAlias = "Callable[[Collection[TP] | None, float], Awaitable[Records]]"
#: a hook: (the next fetch in the chain, active partitions, timeout) -> TP -> records
Hook: TypeAlias = "Callable[[Fetch, Collection[TP] | None, float], Awaitable[Records]]"

#: the ranks of streamjoin's hooks: a join's intake sees the fetch first, the
#: guard then seeks back what faust would not deliver of the rest
INTAKE = 10
GUARD = 20


class FetchChain:
    """The hooks around one consumer's original fetch (installed as its ``_getmany``)."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self._hooks: dict[str, tuple[int, Hook]] = {}
        #: the fetch with every hook around it, composed when a hook is registered
        self._call: Fetch = fetch

    def register(self, name: str, rank: int, hook: Hook) -> bool:
        """Add (or replace) the hook *name*; returns whether the name is new."""
        new = name not in self._hooks
        self._hooks[name] = (rank, hook)
        call = self._fetch
        for each in self.names():
            call = functools.partial(self._hooks[each][1], call)
        self._call = call
        return new

    def names(self) -> list[str]:
        """The hooks' names, nearest the broker first."""
        return [name for _, name in sorted((rank, name) for name, (rank, _) in self._hooks.items())]

    async def __call__(self, active_partitions: Collection[TP] | None, timeout: float) -> Records:
        return await self._call(active_partitions, timeout)


def fetch_chain(consumer: ConsumerT) -> FetchChain:
    """The chain on faust's *consumer*, installed on first use."""
    # ``_getmany`` is declared on faust's transport ``Consumer``, not on ``ConsumerT``
    faust_consumer = cast("Consumer", consumer)
    current = faust_consumer._getmany
    if isinstance(current, FetchChain):
        return current
    # faust declares the records as Mapping[TP, List[Any]]; aiokafka's driver
    # returns a dict of ConsumerRecords
    chain = FetchChain(cast("Fetch", current))
    faust_consumer._getmany = chain  # type: ignore[method-assign]
    return chain
