"""Pausing the cyclic garbage collector around a large assignment or a join's batch
(the callers' choice).

The pure core never touches process-wide state; the worker's assignor adapter,
``streamjoin assign`` and the benchmark pause the collector around an
assignment, and a join's operator around each batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator, Iterator

__all__ = ["BATCH_SCHEDULE", "gc_paused", "gc_paused_async"]

#: a join's batches: under load the collector runs between them, its young
#: generations every 5 s and all of them every 60 s (*every*, *full_every*).
#: Each young collection looks at the fetched records waiting at that moment
#: and at the state's new rows; every 5 s instead of every second, the join
#: read a 4.9M-record backlog 7% faster and a 1M one 3% faster (one pass
#: each; docs/benchmarks.rst, "What grew with history"). The cyclic garbage
#: a worker makes (asyncio's) is a few dozen objects a second.
BATCH_SCHEDULE = (5.0, 60.0)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block.

    An assignment of 100,000 tasks allocates millions of small tuples and
    lists and creates no reference cycles; left on, the collector's repeated
    generation scans cost a third of the run. Reference counting still frees
    everything; the collector resumes (if it was on) when the block ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.asynccontextmanager
async def gc_paused_async(every: float = 0.0, full_every: float = 0.0) -> AsyncIterator[None]:
    """Pause the cyclic garbage collector while a join's batch runs, awaits included.

    A batch makes tens of thousands of short-lived tuples, lists and dicts
    (records, state changes, outputs) that live until the batch is durable.
    With the collector on, they survive many young-generation collections,
    are promoted to the oldest generation and make it run full collections
    over everything the worker holds, its join state in memory included: 40%
    of a worker's time on a 1M-record backlog (``python -m benchmarks.join``:
    21,319 records/s collecting, 32,422 paused per batch, 34,597 never
    collecting; docs/benchmarks.rst). Paused, reference counting frees them
    when the batch ends. A pause is process-wide: nested or concurrent
    pauses (two joins) end only when the last one ends.

    Without *every*, the collector runs again between batches. With *every*
    (seconds), it stays off while batches keep coming, and the last pause to
    end collects explicitly instead: the two younger generations once *every*
    s, all three once *full_every* s. So an object is looked at about once
    before it is freed or promoted, instead of once per young collection
    (the records a fetch buffered while a batch ran, and the state's new
    rows, survive several of those): on the 1M-record benchmark backlog the
    collector took 1.47 s of the run on this schedule against 1.94 s paused
    per batch only (``gc.callbacks``, see docs/benchmarks.rst). When no batch
    starts for *every* s, the collector runs on its own again, and a
    collector that was off before the first pause stays off.
    """
    global _pauses
    if _pauses == 0 and not _off.held:
        _off.take()
    _pauses += 1
    try:
        yield
    finally:
        _pauses -= 1
        if _pauses == 0:
            _off.after_pause(asyncio.get_running_loop(), every, full_every)


class _Collector:
    """Who switched the collector off, and when it last collected."""

    def __init__(self) -> None:
        #: whether the collector was on before the pauses took it
        self.was_on = False
        #: the collector is kept off between pauses (see *every*)
        self.held = False
        self.young_at = self.full_at = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.last_end = 0.0

    def take(self) -> None:
        self.was_on = gc.isenabled()
        gc.disable()
        self.young_at = self.full_at = time.monotonic()

    def after_pause(self, loop: asyncio.AbstractEventLoop, every: float, full_every: float) -> None:
        if every <= 0 or not self.was_on:
            self.give_back()
            return
        now = self.last_end = time.monotonic()
        if full_every > 0 and now - self.full_at >= full_every:
            gc.collect()
            self.full_at = self.young_at = now
        elif now - self.young_at >= every:
            gc.collect(1)
            self.young_at = now
        self.held = True
        if self.timer is None:
            self.timer = loop.call_later(every, self._check, loop, every)

    def _check(self, loop: asyncio.AbstractEventLoop, every: float) -> None:
        self.timer = None
        if not self.held or _pauses:
            return
        left = self.last_end + every - time.monotonic()
        if left > 0:
            self.timer = loop.call_later(left, self._check, loop, every)
        else:
            self.give_back()

    def give_back(self) -> None:
        """The collector runs on its own again (if it did before the pauses)."""
        self.held = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.was_on:
            gc.enable()


#: batches pausing the collector now
_pauses = 0
_off = _Collector()
