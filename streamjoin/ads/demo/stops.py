"""Where tasks stopped, and what each rebalance did to them, from the samples. Pure.

A worker's joins page lists, per task, its *stops*: the waits of more than
0.25 s between two records the task processed on that worker (see
:class:`~streamjoin.ads.demo.timeline.Pace`). :func:`stop_intervals` puts
them on the demo's time axis, adding the gap when a task was opened again on
the same worker (a new run of it starts with no stop of its own).

A *rebalance* is a run of sampling rounds, each less than ``2 * AROUND`` s
after the previous one, in which the group generation rose or a task was seen
on another worker than before. :func:`rebalance_outcomes` says, for each,
which tasks kept their worker (same owner before and after) and the longest
any of them stopped from ``AROUND`` s before it began to ``AROUND`` s after
it ended, and which tasks moved and how long no worker processed each (their
:class:`Handover`). :func:`stops_away` gives the stops outside every
rebalance, to compare with: a stop may also be a slow batch or an input with
nothing to deliver.

A stop alone does not tell a paused task from a busy machine, so each
rebalance also says whether its kept tasks *ran through* it: each
processed records while its worker was rebalancing (from the worker's first
JoinGroup to the assignment it got, as its assignment page lists them). An
eager rebalance revokes every task first, so there a task processes nothing
in that span. Spans of :data:`~streamjoin.join.activity.STOP_SECONDS` or
less tell nothing (a gap that short is not a stop) and are not counted, nor
do spans that begin after the input ended (the generator is done): a kept
task may have nothing left to process then, cooperative or not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

from streamjoin.ads.demo.timeline import Interval, Sample, demo_time, owners_by_round
from streamjoin.join.activity import STOP_SECONDS

__all__ = [
    "AROUND",
    "Handover",
    "RebalanceOutcome",
    "rebalance_outcomes",
    "stop_intervals",
    "stops_away",
]

#: seconds before a rebalance began and after it ended in which a kept task's
#: stops count as the rebalance's (samples are a second apart)
AROUND = 2.0

#: (task, worker) -> that worker's stops of that task, ``(start, end)`` wall-clock
_Stops = Mapping[tuple[int, str], Sequence[tuple[float, float]]]


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
        for (_, last), (first, _) in pairwise(sorted(seen.items())):
            if first > last:
                stops.setdefault(pair, set()).add((last, first))
    return {pair: sorted(found) for pair, found in sorted(stops.items())}


def _intervals(stops: _Stops, wall_start: float) -> list[Interval]:
    return sorted(
        (
            Interval(task, worker, demo_time(a, wall_start), demo_time(b, wall_start))
            for (task, worker), found in stops.items()
            for a, b in found
        ),
        key=lambda i: (i.task, i.start, i.worker),
    )


def stop_intervals(samples: Iterable[Sample], wall_start: float) -> list[Interval]:
    """Every stop of a task on a worker, on the demo's axis, sorted by task then
    start; *wall_start*: ``time.time()`` when the demo started."""
    return _intervals(_pair_stops(samples), wall_start)


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
    """What one rebalance did to the tasks (times in demo seconds).

    Attributes:
        began: the last round before it (or, earlier, the last round a moved
            task was seen on its old owner).
        t: its last round (the new owners seen).
        window: where a kept task's stops count: ``AROUND`` s around both.
        cause: the last event at or before ``t`` (``None``: none).
        generations: the lowest and highest group generation seen in it.
        kept: task -> its longest stop in the window (``None``: it ran
            through), for the tasks with the same worker before and after
            whose worker's page showed them processing in the window.
        unseen: the other kept tasks (their pace was not shown then).
        moved: task -> its handover.
        through: kept task -> it processed records in every span in which
            its worker was rebalancing (its rebalances that overlap the
            window and last more than ``STOP_SECONDS``); tasks whose worker
            listed no such span are left out.
        rebalancing: the longest of those spans, seconds (``None``: none).
    """

    began: float
    t: float
    window: tuple[float, float]
    cause: str | None
    generations: tuple[int, int] | None
    kept: Mapping[int, Interval | None]
    unseen: tuple[int, ...]
    moved: Mapping[int, Handover]
    through: Mapping[int, bool] = field(default_factory=dict)
    rebalancing: float | None = None

    def as_dict(self) -> dict[str, Any]:  # Any: JSON values
        """JSON-ready (``report/rebalances.json``), seconds to the millisecond:
        ``began``, ``t``, ``generations`` (``[low, high]`` or ``None``),
        ``cause``, ``kept`` (task -> its longest stop, ``None``: none),
        ``unseen``, ``through``, ``rebalancing`` and ``moved`` (task ->
        ``source``, ``target``, ``seconds`` unprocessed or ``None``)."""
        return {
            "began": round(self.began, 3),
            "t": round(self.t, 3),
            "generations": None if self.generations is None else list(self.generations),
            "cause": self.cause,
            "kept": {
                str(task): None if stop is None else round(stop.end - stop.start, 3)
                for task, stop in sorted(self.kept.items())
            },
            "unseen": list(self.unseen),
            "through": {str(task): ran for task, ran in sorted(self.through.items())},
            "rebalancing": None if self.rebalancing is None else round(self.rebalancing, 3),
            "moved": {
                str(task): {
                    "source": h.source,
                    "target": h.target,
                    "seconds": None if h.seconds is None else round(h.seconds, 3),
                }
                for task, h in sorted(self.moved.items())
            },
        }

    def longest_kept_stop(self) -> Interval | None:
        """The longest stop of a kept task (``None``: every one ran through)."""
        stops = [s for s in self.kept.values() if s is not None]
        return max(stops, key=lambda s: (s.end - s.start, -s.task), default=None)

    def longest_handover(self) -> Handover | None:
        """The moved task's handover that took longest (``None``: none known)."""
        known = [h for h in self.moved.values() if h.seconds is not None]
        return max(known, key=lambda h: (h.seconds or 0.0, -h.task), default=None)


@dataclass(frozen=True)
class _Round:
    """A sampling round: owners, the last owner seen of every task, generation."""

    t: float
    owners: Mapping[int, str]
    seen: Mapping[int, tuple[str, float]]
    generation: int | None
    changed: bool


def _rounds(samples: Sequence[Sample]) -> list[_Round]:
    """Every round, marked changed when the generation rose or a task was seen on
    another worker than the last one it was seen on."""
    generations: dict[float, int] = {}
    for s in samples:
        if s.generation is not None:
            generations[s.t] = max(generations.get(s.t, s.generation), s.generation)
    out = []
    seen: dict[int, tuple[str, float]] = {}
    top: int | None = None
    for t, owners in owners_by_round(samples):
        generation = generations.get(t)
        moved = any(task in seen and seen[task][0] != owner for task, owner in owners.items())
        risen = generation is not None and top is not None and generation > top
        if generation is not None:
            top = generation if top is None else max(top, generation)
        seen.update((task, (owner, t)) for task, owner in owners.items())
        out.append(_Round(t, owners, dict(seen), generation, moved or risen))
    return out


def rebalance_outcomes(
    samples: Sequence[Sample],
    events: Sequence[tuple[float, str]],
    wall_start: float,
    around: float = AROUND,
    input_done: str | None = None,
) -> list[RebalanceOutcome]:
    """What every rebalance did to the tasks (see the module's docstring);
    *events*: the run's ``(time, label)``; *wall_start*: ``time.time()`` when
    the demo started; *input_done*: the label of the event that says the
    generator was done (``None``, or no such event: the input never ended).
    A rebalance of which nothing is known (no task's pace shown around it,
    e.g. before the generator started) is left out."""
    ended = next((t for t, label in events if label == input_done), None)
    until = None if ended is None else wall_start + ended
    stops = _pair_stops(samples)
    rounds = _rounds(samples)
    clusters: list[list[int]] = []
    for n, round_ in enumerate(rounds):
        if not round_.changed:  # never the first round: nothing was seen before it
            continue
        if clusters and round_.t - rounds[clusters[-1][-1]].t < 2 * around:
            clusters[-1].append(n)
        else:
            clusters.append([n])
    outcomes = []
    for cluster in clusters:
        last = rounds[cluster[-1]]
        generations = [g for n in cluster if (g := rounds[n].generation) is not None]
        cause = max((e for e in events if e[0] <= last.t), default=None, key=lambda e: e[0])
        outcome = _outcome(
            samples, stops, rounds[cluster[0] - 1], last, (wall_start, until), around
        )
        outcome = replace(
            outcome,
            cause=None if cause is None else cause[1],
            generations=(min(generations), max(generations)) if generations else None,
        )
        if outcome.kept or any(h.seconds is not None for h in outcome.moved.values()):
            outcomes.append(outcome)
    return outcomes


def _outcome(
    samples: Sequence[Sample],
    stops: _Stops,
    before: _Round,
    last: _Round,
    wall: tuple[float, float | None],
    around: float,
) -> RebalanceOutcome:
    """Kept and moved tasks from round *before* to round *last* (no cause, no
    generations yet); *wall*: when the demo started and when its input ended
    (``time.time()``; ``None``: not within the run)."""
    wall_start, until = wall
    moved = {
        task: _handover(samples, task, before.seen[task], (owner, last.t), wall_start)
        for task, owner in sorted(last.owners.items())
        if task in before.seen and before.seen[task][0] != owner
    }
    began = min([before.t, *(before.seen[task][1] for task in moved)])
    window = (began - around, last.t + around)
    kept: dict[int, Interval | None] = {}
    unseen = []
    for task, owner in sorted(last.owners.items()):
        if task in moved or task not in before.seen or before.seen[task][0] != owner:
            continue
        if not _processing(samples, task, owner, lambda t: window[0] <= t <= window[1]):
            unseen.append(task)
            continue
        overlapping = [
            i
            for i in _intervals({(task, owner): stops.get((task, owner), ())}, wall_start)
            if i.start < window[1] and i.end > window[0]
        ]
        kept[task] = max(overlapping, key=lambda i: i.end - i.start, default=None)
    rebalancing = {
        owner: _rebalancing(samples, owner, window, wall_start)
        for owner in sorted({last.owners[task] for task in kept})
    }
    through, lengths = _ran_through(samples, stops, kept, last.owners, rebalancing, until)
    longest = max(lengths, default=None)
    return RebalanceOutcome(
        began, last.t, window, None, None, kept, tuple(unseen), moved, through, longest
    )


def _ran_through(
    samples: Sequence[Sample],
    stops: _Stops,
    kept: Iterable[int],
    owners: Mapping[int, str],
    rebalancing: Mapping[str, list[tuple[float, float]]],
    until: float | None,
) -> tuple[dict[int, bool], list[float]]:
    """Per kept task, whether it processed records in every counted span in which
    its worker was rebalancing (tasks with no such span left out), and the
    lengths of those spans."""
    through: dict[int, bool] = {}
    lengths: list[float] = []
    for task in kept:
        owner = owners[task]
        steps = _processing(samples, task, owner, lambda _: True)
        # the spans in which the task was running on its worker (steps before
        # and after) with input still coming: not one in which it was added
        # there, nor one that ended after the last page read, nor one that
        # began after the generator was done
        spans = [
            (a, b)
            for a, b in rebalancing[owner]
            if min(s for s, _ in steps) <= a
            and max(e for _, e in steps) >= b
            and (until is None or a < until)
        ]
        if spans:
            through[task] = not any(
                start <= a and end >= b
                for a, b in spans
                for start, end in stops.get((task, owner), ())
            )
            lengths += [b - a for a, b in spans]
    return through, lengths


def _rebalancing(
    samples: Iterable[Sample], worker: str, window: tuple[float, float], wall_start: float
) -> list[tuple[float, float]]:
    """*worker*'s rebalances (wall-clock spans) longer than ``STOP_SECONDS``
    that overlap *window* (demo seconds), once each, in order."""
    found = {
        (a, b)
        for sample in samples
        if sample.worker == worker
        for a, b in sample.rebalancing
        if b - a > STOP_SECONDS
        and demo_time(a, wall_start) < window[1]
        and demo_time(b, wall_start) > window[0]
    }
    return sorted(found)


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


def stops_away(
    samples: Iterable[Sample], outcomes: Sequence[RebalanceOutcome], wall_start: float
) -> list[Interval]:
    """The stops that overlap no rebalance's window: how long tasks stopped
    anyway (slow batches, inputs with nothing to deliver)."""
    return [
        stop
        for stop in stop_intervals(samples, wall_start)
        if not any(stop.start < o.window[1] and stop.end > o.window[0] for o in outcomes)
    ]
