"""Fixed-bucket histograms the runtime fills and ``/metrics`` reads. Pure.

The join's batches, its tasks' stops and the worker's rebalances are observed
once each (never per record) into a :class:`Buckets`; the metrics endpoint
turns its counts into a Prometheus histogram at scrape time
(:mod:`streamjoin.faust.metrics.collect`), so nothing else pays for it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

__all__ = ["RECORD_BOUNDS", "SECOND_BOUNDS", "Buckets"]

#: upper bounds (seconds) for durations: a few ms to a minute
SECOND_BOUNDS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
#: upper bounds for record counts of a batch
RECORD_BOUNDS: tuple[float, ...] = (
    1, 10, 100, 500, 1_000, 5_000, 10_000, 50_000, 100_000,
)  # fmt: skip


class Buckets:
    """Counts of observations per upper bound (not cumulative), their sum and count."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError(f"bucket bounds must increase strictly, got {list(bounds)}")
        self.bounds = tuple(bounds)
        #: per bound, then one more for everything above the last (+Inf)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count of observations <= le)`` for every bound and ``+Inf``, as a
        Prometheus histogram lists them."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else _le(bound), running))
        return out


def _le(bound: float) -> str:
    return repr(float(bound))
