"""Consume the partitions of one task in event-time order.

A task reads one partition of each joined topic. If one of them has a
backlog (after a restart, a rebalance or a slow fetch), reading it as fast as
it comes would push stream time ahead and make the other topic's records
look late. :class:`EventTimeMerger` buffers what was fetched from each input
and releases records smallest event time first; when an input's buffer is
empty but the input still has unread data, it waits for it. The wait ends
when no record at all has arrived for ``max_idle_ms`` (like Kafka Streams'
``max.task.idle.ms``; records still arriving on the other input mean the
consumer is working through a backlog, and the starving input's records are
queued behind them), or when ``max_buffered`` records are held. Pure: the
runtime tells it what was fetched, what is still unread, and the time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from streamjoin.join.errors import JoinConfigError

__all__ = ["EventTimeMerger"]

R = TypeVar("R")


class EventTimeMerger(Generic[R]):
    """Merge records of several inputs by event time, waiting boundedly for a lagging input."""

    def __init__(
        self, inputs: Sequence[str], max_idle_ms: int, max_buffered: int | None = None
    ) -> None:
        if not inputs or len(set(inputs)) != len(inputs):
            raise JoinConfigError(f"EventTimeMerger needs distinct input names, got {inputs!r}")
        if max_idle_ms < 0:
            raise JoinConfigError(f"max_idle_ms must be >= 0, got {max_idle_ms}")
        self.inputs = tuple(inputs)
        if max_buffered is not None and max_buffered < 1:
            raise JoinConfigError(f"max_buffered must be >= 1, got {max_buffered}")
        self.max_idle_ms = max_idle_ms
        self.max_buffered = max_buffered
        self._buffers: dict[str, deque[tuple[int, R]]] = {name: deque() for name in inputs}
        self._waiting_since: int | None = None
        self._enforced = False
        #: times the merger went on without an input that still had unread data
        self.idle_expirations = 0

    def add(self, source: str, ts: int, record: R, now_ms: int | None = None) -> None:
        """Buffer a fetched record (records of one input arrive in offset order).

        With ``now_ms``, the arrival counts as progress: an ongoing wait for a
        starving input starts over (its records may be queued behind this one).
        """
        self._buffers[source].append((ts, record))
        if now_ms is not None and self._waiting_since is not None and not self._enforced:
            self._waiting_since = now_ms

    def progress(self, now_ms: int) -> None:
        """Records arrived for the runtime at ``now_ms`` (for any task): the
        consumer is busy, so an ongoing wait for a starving input starts over."""
        if self._waiting_since is not None and not self._enforced:
            self._waiting_since = max(self._waiting_since, now_ms)

    def buffered(self) -> int:
        """Records held back so far."""
        return sum(len(b) for b in self._buffers.values())

    def poll(self, now_ms: int, unread: Mapping[str, bool]) -> list[tuple[str, R]]:
        """Release what may be processed now, in event-time order.

        ``unread[name]`` says whether input ``name`` has data on the broker that
        has not been fetched yet (position < high watermark). An input with an
        empty buffer and unread data holds the others back until
        ``max_idle_ms`` has passed since the merger started waiting for it.
        """
        out: list[tuple[str, R]] = []
        while True:
            heads = {n: b[0][0] for n, b in self._buffers.items() if b}
            if not heads:
                return out
            starving = [n for n in self.inputs if n not in heads and unread.get(n, False)]
            if starving:
                if self._waiting_since is None:
                    self._waiting_since = now_ms
                full = self.max_buffered is not None and self.buffered() >= self.max_buffered
                waiting = now_ms - self._waiting_since < self.max_idle_ms and not full
                if waiting and not self._enforced:
                    return out
                if not self._enforced:
                    # waited long enough: go on without the starving input
                    # until it delivers again
                    self._enforced = True
                    self.idle_expirations += 1
            else:
                self._waiting_since = None
                self._enforced = False
            # smallest event time first; ties go to the input listed first
            name = min(heads, key=lambda n: (heads[n], self.inputs.index(n)))
            _, record = self._buffers[name].popleft()
            out.append((name, record))
