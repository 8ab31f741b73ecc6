"""Which worker held which task over time, from periodic samples. Pure.

The demo polls every worker's ``/streamjoin/assignment/`` page; each poll is a
:class:`Sample`. :func:`ownership_intervals` turns the samples into
``(task, worker, start, end)`` bars for the report's timeline chart, and
:func:`rebalances` lists the moments the owner of any task changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Interval", "Sample", "ownership_intervals", "rebalances"]


@dataclass(frozen=True)
class Sample:
    """At time ``t`` (seconds since the demo started), ``worker`` ran ``tasks``."""

    t: float
    worker: str
    tasks: tuple[int, ...]


@dataclass(frozen=True)
class Interval:
    """``worker`` ran ``task`` from ``start`` to ``end`` (seconds)."""

    task: int
    worker: str
    start: float
    end: float


def _owners_by_time(samples: Iterable[Sample]) -> list[tuple[float, dict[int, str]]]:
    """Owner of every task at each sampling round (samples with equal ``t`` form a round)."""
    rounds: dict[float, dict[int, str]] = {}
    for sample in sorted(samples, key=lambda s: (s.t, s.worker)):
        owners = rounds.setdefault(sample.t, {})
        for task in sample.tasks:
            owners.setdefault(task, sample.worker)
    return sorted(rounds.items())


def ownership_intervals(samples: Iterable[Sample], end: float) -> list[Interval]:
    """Contiguous ownership bars, sorted by task then start."""
    open_: dict[int, tuple[str, float]] = {}
    out: list[Interval] = []
    for t, owners in _owners_by_time(samples):
        for task in sorted(set(open_) | set(owners)):
            current = open_.get(task)
            owner = owners.get(task)
            if current is not None and current[0] == owner:
                continue
            if current is not None:
                out.append(Interval(task, current[0], current[1], t))
                del open_[task]
            if owner is not None:
                open_[task] = (owner, t)
    for task, (worker, start) in sorted(open_.items()):
        out.append(Interval(task, worker, start, max(end, start)))
    return sorted(out, key=lambda i: (i.task, i.start))


def rebalances(samples: Sequence[Sample]) -> list[float]:
    """Times at which some task got a new owner (first assignment excluded)."""
    marks: list[float] = []
    previous: Mapping[int, str] | None = None
    for t, owners in _owners_by_time(samples):
        if previous is not None and any(
            previous.get(task) != owner for task, owner in owners.items()
        ):
            marks.append(t)
        if owners:
            previous = owners
    return marks
