"""Pausing the cyclic garbage collector around a large assignment (the callers' choice).

The pure core never touches process-wide state; the worker's assignor adapter,
``streamjoin assign`` and the benchmark pause the collector around it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


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
