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
processed (a :class:`Pace` in the sample): records processed, its first and
latest processing step, and its *stops* (waits of more than 0.25 s between
two records it processed), in the worker's wall-clock seconds, which
:func:`demo_time` puts on the demo's time axis. :func:`stop_intervals` gives
the stops as bars; :func:`rebalance_outcomes` says, at each rebalance, which
tasks kept their worker and how long they stopped nearby, and which moved
and how long no worker processed them (their :class:`Handover`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

__all__ = [
    "AROUND",
    "Handover",
    "Interval",
    "Pace",
    "RebalanceOutcome",
    "Sample",
    "demo_time",
    "longest_restoring",
    "ownership_intervals",
    "rebalance_outcomes",
    "rebalances",
    "restoring_intervals",
    "stop_intervals",
    "warmup_intervals",
]

#: seconds before a rebalance began and after it ended in which a kept task's
#: stops count as the rebalance's (samples are a second apart)
AROUND = 2.0


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
    runs processed (:class:`Pace`).
    """

    t: float
    worker: str
    tasks: tuple[int, ...]
    restoring: tuple[int, ...] = ()
    warmups: tuple[int, ...] = ()
    paces: tuple[Pace, ...] = ()


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


def _pair_stops(samples: Iterable[Sample]) -> dict[tuple[int, str], list[tuple[float, float]]]:
    """(task, worker) -> every stop the worker reported of the task, once each,
    in order (wall-clock). A task opened again on the same worker (a new run
    of it: a later first step) stopped from its last step before to that."""
    stops: dict[tuple[int, str], set[tuple[float, float]]] = {}
    runs: dict[tuple[int, str], dict[float, float]] = {}
    for sample in samples:
        for pace in sample.paces:
            pair = (pace.task, sample.worker)
            stops.setdefault(pair, set()).update(pace.stops)
            if pace.processing is not None:
                first, last = pace.processing
                seen = runs.setdefault(pair, {})
                seen[first] = max(seen.get(first, last), last)
    for pair, seen in runs.items():
        spans = sorted(seen.items())
        for (_, last), (first, _) in pairwise(spans):
            if first > last:
                stops.setdefault(pair, set()).add((last, first))
    return {pair: sorted(found) for pair, found in sorted(stops.items())}


def stop_intervals(samples: Iterable[Sample], wall_start: float) -> list[Interval]:
    """Every stop of a task on a worker, on the demo's axis, sorted by task then start."""
    return sorted(
        (
            Interval(task, worker, demo_time(a, wall_start), demo_time(b, wall_start))
            for (task, worker), found in _pair_stops(samples).items()
            for a, b in found
        ),
        key=lambda i: (i.task, i.start, i.worker),
    )


@dataclass(frozen=True)
class Handover:
    """Task ``task`` moved from ``source`` to ``target``: no worker processed it
    from ``start`` (the source's last step seen) to ``end`` (the target's first
    step), demo seconds. ``None``: not known (the source's page never showed
    a step; the target had not processed it by the end of the run).

    A killed source's last second or so is not seen (the pages are read once a
    second): ``start`` may be up to that much early.
    """

    task: int
    source: str
    target: str
    start: float | None
    end: float | None

    @property
    def seconds(self) -> float | None:
        """How long the task was not processed (``None``: not known)."""
        return None if self.start is None or self.end is None else self.end - self.start


@dataclass(frozen=True)
class RebalanceOutcome:
    """What a rebalance at ``t`` (the sampling round that saw its new owners) did.

    ``cause``: the last event at or before it (``None``: none);
    ``began``: the last round a moved task was seen on its old owner.
    ``kept``: task -> its longest stop (seconds) from ``AROUND`` s before
    ``began`` to ``AROUND`` s after ``t``, for each task with the same owner
    before and after; ``0.0``: it ran through, ``None``: its worker's page
    never said how it processed then. ``moved``: task -> its handover.
    """

    t: float
    cause: str | None
    began: float
    kept: Mapping[int, float | None]
    moved: Mapping[int, Handover]

    def longest_kept_stop(self) -> tuple[int, float] | None:
        """(task, seconds) of the kept task that stopped longest; ``None``: none known."""
        known = [(seconds, task) for task, seconds in self.kept.items() if seconds is not None]
        if not known:
            return None
        seconds, task = max(known, key=lambda k: (k[0], -k[1]))
        return task, seconds

    def longest_handover(self) -> Handover | None:
        """The moved task's handover that took longest (unknown ones last)."""
        known = [h for h in self.moved.values() if h.seconds is not None]
        return max(known, key=lambda h: (h.seconds or 0.0, -h.task), default=None)


def rebalance_outcomes(
    samples: Sequence[Sample],
    events: Sequence[tuple[float, str]],
    wall_start: float,
    around: float = AROUND,
) -> list[RebalanceOutcome]:
    """At each rebalance (those of :func:`rebalances` in which a task got
    another owner than the last one seen, not just its owner's page back
    after missing a round): which tasks kept their worker and
    their longest stop nearby, which moved and their :class:`Handover`.
    *events*: the run's ``(time, label)`` list, the cause of a rebalance being
    the last one before it; *wall_start*: ``time.time()`` when the demo started."""
    stops = _pair_stops(samples)
    #: task -> (owner, time of the last round it was seen there)
    seen: dict[int, tuple[str, float]] = {}
    outcomes = []
    for t, owners in _owners_by_time(samples):
        moved = {
            task: _handover(samples, task, seen[task], (owner, t), wall_start)
            for task, owner in sorted(owners.items())
            if task in seen and seen[task][0] != owner
        }
        if moved:
            began = min(seen[task][1] for task in moved)
            window = (began - around, t + around)
            kept = {
                task: _longest_stop(samples, stops, (task, owner), window, wall_start)
                for task, owner in sorted(owners.items())
                if task in seen and seen[task][0] == owner
            }
            cause = max((e for e in events if e[0] <= t), default=None, key=lambda e: e[0])
            outcomes.append(
                RebalanceOutcome(t, None if cause is None else cause[1], began, kept, moved)
            )
        for task, owner in owners.items():
            seen[task] = (owner, t)
    return outcomes


def _processing(
    samples: Iterable[Sample], task: int, worker: str, when: Callable[[float], bool]
) -> list[tuple[float, float]]:
    """(first, last) steps of *task* that *worker*'s samples at the times *when*
    accepts show (wall-clock)."""
    spans = []
    for sample in samples:
        if sample.worker == worker and when(sample.t):
            pace = next((p for p in sample.paces if p.task == task), None)
            if pace is not None and pace.processing is not None:
                spans.append(pace.processing)
    return spans


def _longest_stop(
    samples: Sequence[Sample],
    stops: Mapping[tuple[int, str], list[tuple[float, float]]],
    pair: tuple[int, str],
    window: tuple[float, float],
    wall_start: float,
) -> float | None:
    """The longest stop of *pair* (task, worker) overlapping *window* (demo
    seconds); ``0.0`` when none, ``None`` when no sample of the worker in the
    window shows the task processing."""
    task, worker = pair
    lo, hi = window
    if not _processing(samples, task, worker, lambda t: lo <= t <= hi):
        return None
    spans = ((demo_time(a, wall_start), demo_time(b, wall_start)) for a, b in stops.get(pair, ()))
    return max((b - a for a, b in spans if a < hi and b > lo), default=0.0)


def _handover(
    samples: Sequence[Sample],
    task: int,
    source: tuple[str, float],
    target: tuple[str, float],
    wall_start: float,
) -> Handover:
    """*task*'s handover from *source* (worker, the last round its assignment
    listed the task) to *target* (worker, the round that saw it there): the
    source's last step its joins page showed until then (it may show the task
    a round after its assignment stopped listing it), the target's first step
    after the source's last round."""
    (worker, held), (new, seen) = source, target
    last = [b for _, b in _processing(samples, task, worker, lambda t: t <= seen)]
    first = [a for a, _ in _processing(samples, task, new, lambda t: t > held)]
    return Handover(
        task,
        worker,
        new,
        demo_time(max(last), wall_start) if last else None,
        demo_time(min(first), wall_start) if first else None,
    )
