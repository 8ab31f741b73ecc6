"""Measurement helpers: percentiles, polled counts and rates, directory sizes, peak RSS."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def percentile(values: Sequence[float], pct: float) -> float:
    """The nearest-rank ``pct`` percentile of *values* (``0 < pct <= 100``).

    The smallest value such that at least ``pct`` percent of the values are
    less than or equal to it; always one of the values.

    Raises:
        ValueError: *values* is empty or *pct* is outside ``(0, 100]``.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not (isinstance(pct, int | float) and 0 < pct <= 100):
        raise ValueError(f"percentile must be in (0, 100], got {pct!r}")
    ordered = sorted(values)
    rank = math.ceil(pct / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


@dataclass(frozen=True)
class LatencySummary:
    """Percentiles of a set of latencies, in milliseconds."""

    count: int
    p50: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> LatencySummary:
        """Summarise *values_ms* (at least one value)."""
        return cls(
            count=len(values_ms),
            p50=percentile(values_ms, 50),
            p95=percentile(values_ms, 95),
            p99=percentile(values_ms, 99),
            max=max(values_ms),
        )


@dataclass(frozen=True)
class Sample:
    """A polled count and the (monotonic) time it was observed."""

    at: float
    count: int


@dataclass(frozen=True)
class Throughput:
    """One worker's pass over the backlog, timed from its first processed record.

    ``first`` is the first poll that saw a processed record, ``last`` the first
    that saw them all; records counted before ``first`` are not timed.
    """

    name: str
    records: int
    first: Sample
    last: Sample
    startup_s: float = 0.0
    #: (records processed, resident set size in bytes) at each poll from the
    #: first processed record on, when the pass's process was watched for it
    memory: tuple[tuple[int, int], ...] = ()

    @property
    def seconds(self) -> float:
        """Seconds between the two polls."""
        return self.last.at - self.first.at

    @property
    def timed(self) -> int:
        """Records processed between the two polls."""
        return self.last.count - self.first.count

    @property
    def rate(self) -> float:
        """Records per second (NaN when the pass was too short to time)."""
        if self.seconds <= 0 or self.timed <= 0:
            return math.nan
        return self.timed / self.seconds


def dir_bytes(path: Path) -> dict[str, int]:
    """Bytes of the files below *path*: ``sst``, ``wal`` (``*.log``), ``other`` and ``total``."""
    sizes = {"sst": 0, "wal": 0, "other": 0}
    for file in sorted(path.rglob("*")):
        if not file.is_file():
            continue
        size = file.stat().st_size
        if file.suffix == ".sst":
            sizes["sst"] += size
        elif file.suffix == ".log":
            sizes["wal"] += size
        else:
            sizes["other"] += size
    sizes["total"] = sum(sizes.values())
    return sizes


# ---------------------------------------------------------------- peak memory of a call

#: how :class:`PeakRss` measures, as the reports print it
PEAK_RSS_METHOD = (
    "peak RSS growth during the call (VmHWM reset via /proc/self/clear_refs; "
    "ru_maxrss when that is unavailable)"
)


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


class PeakRss:
    """Growth of this process's peak resident set size from construction on.

    The kernel's high-water mark (``VmHWM``) is reset through ``/proc/self/clear_refs``
    when the object is built and read by :meth:`growth_bytes`, minus the resident size
    at the start; where the reset is not possible, ``ru_maxrss`` is read instead.  It is
    RSS-based (whole process, includes interpreter allocator slack), not tracemalloc.
    """

    def __init__(self) -> None:
        self.reset = _reset_peak()
        self.rss_before = _status_kib("VmRSS") or 0

    def growth_bytes(self) -> int:
        """Bytes the peak grew by since construction (never negative)."""
        if self.reset:
            peak_kib = (_status_kib("VmHWM") or 0) - self.rss_before
        else:
            import resource

            peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - self.rss_before
        return max(0, peak_kib) * 1024


def process_peak_rss_bytes(pid: int | None) -> int | None:
    """The peak resident set size (``VmHWM``) of the running process *pid* so far, in
    bytes (``None``: no such process, or no ``/proc``)."""
    return _process_status_bytes(pid, "VmHWM:")


def process_rss_bytes(pid: int | None) -> int | None:
    """The resident set size (``VmRSS``) of the running process *pid* now, in bytes
    (``None``: no such process, or no ``/proc``)."""
    return _process_status_bytes(pid, "VmRSS:")


def _process_status_bytes(pid: int | None, field: str) -> int | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def memory_at(memory: Sequence[tuple[int, int]], count: int) -> int | None:
    """The resident set size of the first sample of *memory* (records processed,
    bytes) with at least *count* records processed (``None``: none has)."""
    for seen, rss in memory:
        if seen >= count:
            return rss
    return None
