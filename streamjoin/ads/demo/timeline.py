"""Which worker held which task over time, from periodic samples. Pure.

The demo polls every worker's ``/streamjoin/assignment/`` page; each poll is a
:class:`Sample`. :func:`ownership_intervals` turns the samples into
``(task, worker, start, end)`` bars for the report's timeline chart, and
:func:`rebalances` lists the moments the owner of any task changed.

A task is *restoring* on a worker that owns it while that worker has not
finished restoring its state (cold, from the changelog): the task processes
nothing meanwhile, wherever else its state is. A *warm-up* is a worker
restoring a task's state while the task keeps running on its owner.
:func:`restoring_intervals` and :func:`warmup_intervals` give both as bars,
:func:`longest_restoring` the longest unavailable stretch of each task.

Each worker's ``/streamjoin/joins/`` page also says how each of its tasks
processed (a :class:`Pace` in the sample), in the worker's wall-clock
seconds, which :func:`demo_time` puts on the demo's time axis;
:mod:`~streamjoin.ads.demo.stops` reads the stops and the rebalances from them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Interval",
    "Pace",
    "Sample",
    "demo_time",
    "longest_restoring",
    "owners_by_round",
    "ownership_intervals",
    "rebalances",
    "restoring_intervals",
    "warmup_intervals",
]


@dataclass(frozen=True)
class Pace:
    """How a worker's task processed, as its joins page said (wall-clock seconds).

    ``processing``: its first and latest processing step on that worker
    (``None``: none yet); ``stops``: its recent waits of more than 0.25 s
    between two records it processed, ``(start, end)``.
    """

    task: int
    processed: int = 0
    processing: tuple[float, float] | None = None
    stops: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class Sample:
    """At time ``t`` (seconds since the demo started), ``worker`` ran ``tasks``.

    ``restoring``: those of ``tasks`` whose state the worker was still
    restoring (not processing yet); ``warmups``: tasks whose state it was
    warming up while they ran elsewhere; ``paces``: how each task its join
    runs processed (:class:`Pace`); ``generation``: the group generation of
    the worker's assignment (``None``: not said); ``rebalancing``: the
    worker's latest rebalances as its assignment page listed them, each from
    its first JoinGroup to the assignment it got (wall-clock seconds).
    """

    t: float
    worker: str
    tasks: tuple[int, ...]
    restoring: tuple[int, ...] = ()
    warmups: tuple[int, ...] = ()
    paces: tuple[Pace, ...] = ()
    generation: int | None = None
    rebalancing: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class Interval:
    """``worker`` ran ``task`` from ``start`` to ``end`` (seconds)."""

    task: int
    worker: str
    start: float
    end: float


def owners_by_round(samples: Iterable[Sample]) -> list[tuple[float, dict[int, str]]]:
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
    for t, owners in owners_by_round(samples):
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
    for t, owners in owners_by_round(samples):
        if previous is not None and any(
            previous.get(task) != owner for task, owner in owners.items()
        ):
            marks.append(t)
        if owners:
            previous = owners
    return marks


def _rounds(samples: Iterable[Sample]) -> list[tuple[float, list[Sample]]]:
    """Samples grouped by sampling round (equal ``t``), in time order."""
    rounds: dict[float, list[Sample]] = {}
    for sample in sorted(samples, key=lambda s: (s.t, s.worker)):
        rounds.setdefault(sample.t, []).append(sample)
    return sorted(rounds.items())


def _pair_intervals(
    samples: Iterable[Sample], end: float, pick: Callable[[Sample], Iterable[int]]
) -> list[Interval]:
    """Bars of every (task, worker) pair over the rounds in which ``pick`` of the
    worker's sample lists the task; a worker missing from a round ends its bars."""
    open_: dict[tuple[int, str], float] = {}
    out: list[Interval] = []
    for t, round_ in _rounds(samples):
        present = {(task, s.worker) for s in round_ for task in pick(s)}
        for pair in sorted(set(open_) - present):
            out.append(Interval(pair[0], pair[1], open_.pop(pair), t))
        for pair in sorted(present - set(open_)):
            open_[pair] = t
    for (task, worker), start in sorted(open_.items()):
        out.append(Interval(task, worker, start, max(end, start)))
    return sorted(out, key=lambda i: (i.task, i.start, i.worker))


def restoring_intervals(samples: Iterable[Sample], end: float) -> list[Interval]:
    """When each task was owned by a worker still restoring it (unavailable)."""
    return _pair_intervals(samples, end, lambda s: set(s.restoring) & set(s.tasks))


def warmup_intervals(samples: Iterable[Sample], end: float) -> list[Interval]:
    """When a worker warmed a task's state up while the task ran elsewhere."""
    return _pair_intervals(samples, end, lambda s: s.warmups)


def longest_restoring(samples: Iterable[Sample], end: float) -> dict[int, float]:
    """Per task that was ever restoring, its longest restoring stretch (seconds).

    Stretches are measured between sampling rounds, so they are accurate to
    one sampling interval.
    """
    longest: dict[int, float] = {}
    for bar in restoring_intervals(samples, end):
        longest[bar.task] = max(longest.get(bar.task, 0.0), bar.end - bar.start)
    return dict(sorted(longest.items()))


def demo_time(wall: float, wall_start: float) -> float:
    """Wall-clock seconds (``time.time()``, as the workers report them) on the
    demo's axis: seconds since the demo started, *wall_start* being
    ``time.time()`` then (the workers run on the demo's machine: one clock)."""
    return wall - wall_start
