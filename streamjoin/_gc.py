"""Pausing the cyclic garbage collector around a large assignment or a join's batch
(the callers' choice).

The pure core never touches process-wide state; the worker's assignor adapter,
``streamjoin assign`` and the benchmark pause the collector around an
assignment, and a join's operator around each batch.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Iterator

__all__ = ["gc_paused", "gc_paused_async"]


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
async def gc_paused_async() -> AsyncIterator[None]:
    """Pause the cyclic garbage collector while a join's batch runs, awaits included.

    A batch makes tens of thousands of short-lived tuples, lists and dicts
    (records, state changes, outputs) that live until the batch is durable.
    With the collector on, they survive many young-generation collections,
    are promoted to the oldest generation and make it run full collections
    over everything the worker holds, its join state in memory included: 40%
    of a worker's time on a 1M-record backlog (``python -m benchmarks.join``:
    21,319 records/s collecting, 32,422 paused per batch, 34,597 never
    collecting; docs/benchmarks.rst). Paused, reference counting frees them
    when the batch ends and the collector runs between batches, so reference
    cycles are still collected. A pause is process-wide: nested or concurrent
    pauses (two joins) resume the collector only when the last one ends.
    """
    global _pauses
    if _pauses == 0:
        _resume.append(gc.isenabled())
        gc.disable()
    _pauses += 1
    try:
        yield
    finally:
        _pauses -= 1
        if _pauses == 0 and _resume.pop():
            gc.enable()


#: batches pausing the collector now, and whether it was on before the first
_pauses = 0
_resume: list[bool] = []
