"""How steadily one join task processes on this worker: :class:`TaskActivity`.

A *step* is a batch that applied records of the task; a *stop* is a wait
longer than :data:`STOP_SECONDS` between two steps in a row, kept as the
wall-clock (``time.time()``) seconds at which it began and ended. A stop says
only that the task applied nothing for that long, whatever the reason: a
rebalance that paused it, a slow batch, or inputs that had nothing to deliver
(an input with no traffic makes stops too). The worker's joins page shows
them (:func:`~streamjoin.faust.join.stats.describe_join`), so that a task kept
through a rebalance can be seen to have run on. Pure: the caller reads the clock.
"""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["STOPS_KEPT", "STOP_SECONDS", "TaskActivity"]

#: a wait between two processing steps of a task longer than this is a stop (seconds)
STOP_SECONDS = 0.25
#: stops a task keeps (the most recent)
STOPS_KEPT = 32


class TaskActivity:
    """A task's records processed and its recent stops, since it opened on this worker.

    Attributes:
        processed: records the task applied (replays skipped are not counted).
        first: wall-clock seconds of its first step (``None``: none yet).
        last: wall-clock seconds of its latest step (``None``: none yet).
        stops: the last :data:`STOPS_KEPT` stops, ``(start, end)`` in wall-clock seconds.
    """

    __slots__ = ("first", "last", "processed", "stops")

    def __init__(self) -> None:
        self.processed = 0
        self.first: float | None = None
        self.last: float | None = None
        self.stops: deque[tuple[float, float]] = deque(maxlen=STOPS_KEPT)

    def step(self, now: float, records: int) -> float:
        """The task applied *records* at *now* (wall-clock seconds); returns the
        stop this step ended (seconds), or 0.0."""
        last = self.last
        stopped = 0.0
        if last is None:
            self.first = now
        elif now - last > STOP_SECONDS:
            self.stops.append((last, now))
            stopped = now - last
        self.last = now
        self.processed += records
        return stopped

    def as_dict(self) -> dict[str, Any]:  # Any: JSON values
        """``processed``, ``stops`` (``[start, end]`` pairs) and ``processing``
        (``[first, last]`` step, ``None`` before the first), to the millisecond."""
        first, last = self.first, self.last
        processing = None if first is None or last is None else [round(first, 3), round(last, 3)]
        return {
            "processed": self.processed,
            "stops": [[round(a, 3), round(b, 3)] for a, b in self.stops],
            "processing": processing,
        }
