"""What a join reports about itself: counters, progress log lines, the web page's view.

:class:`JoinStats` counts what one join did on this worker since it started;
:func:`log_progress` turns the counters into a rate-limited log line
(through the package's one :class:`~streamjoin._progress.ProgressLog`);
:func:`describe_join` is the JSON served on the worker's joins page
(:mod:`streamjoin.faust.web`). Reading them never changes a join.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamjoin._histogram import RECORD_BOUNDS, SECOND_BOUNDS, Buckets
from streamjoin._progress import ProgressLog
from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.join.types import SIDES, JoinConfig
from streamjoin.join.policy import TaskLogic

__all__ = ["JoinStats", "describe_join", "log_progress"]


@dataclass
class JoinStats:
    """Counters of one join on this worker (since the worker started)."""

    received: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    processed: int = 0
    skipped_replays: int = 0
    bad: int = 0
    late: int = 0
    emitted: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    #: times an input of a task went idle (caught up, silent for max_idle_ms)
    idle_inputs: int = 0
    #: an input's consumer started beyond its task's state: read again from the
    #: state's position (rewinds), or, records really gone, accepted (gaps)
    rewinds: int = 0
    gaps: int = 0
    #: tasks opened here (indexes rebuilt from RocksDB), and tasks that went on
    #: through a rebalance without reopening (parked and resumed after an eager
    #: one, kept running through a cooperative one: once per task and rebalance)
    tasks_opened: int = 0
    tasks_kept: int = 0
    #: batches abandoned before they were durable (a rebalance began, the session
    #: lease ran out or a task's owner token changed), and lapses of the lease
    batches_abandoned: int = 0
    lease_lapses: int = 0
    #: changelog records the durable batches wrote
    changelog_records: int = 0
    #: per durable batch: seconds from its release to durable, input records applied;
    #: and each stop of a task (see TaskActivity), observed once each for /metrics
    batch_seconds: Buckets = field(default_factory=lambda: Buckets(SECOND_BOUNDS))
    batch_records: Buckets = field(default_factory=lambda: Buckets(RECORD_BOUNDS))
    task_stops: Buckets = field(default_factory=lambda: Buckets(SECOND_BOUNDS))

    def as_dict(self) -> dict[str, Any]:  # Any: JSON values
        """JSON-ready copy."""
        return {
            "received": dict(self.received),
            "processed": self.processed,
            "skipped_replays": self.skipped_replays,
            "bad": self.bad,
            "late": self.late,
            "emitted": dict(sorted(self.emitted.items())),
            "batches": self.batches,
            "idle_inputs": self.idle_inputs,
            "rewinds": self.rewinds,
            "gaps": self.gaps,
            "tasks_opened": self.tasks_opened,
            "tasks_kept": self.tasks_kept,
            "batches_abandoned": self.batches_abandoned,
            "lease_lapses": self.lease_lapses,
            "changelog_records": self.changelog_records,
        }


def log_progress(
    log: ProgressLog,
    name: str,
    now: float,
    stats: JoinStats,
    tasks: int,
    buffered: int,
    parked: int = 0,
) -> bool:
    """A join's progress line through *log* (when due and records were processed);
    *parked* tasks wait for a rebalance to end (see JoinTask.park)."""

    def line(rate: float) -> tuple[object, ...]:
        emitted = ", ".join(f"{k} {v}" for k, v in sorted(stats.emitted.items()))
        return (
            "join %s: %d tasks%s, %d records processed (%.0f/s), %d buffered, "
            "%d skipped replays; out: %s",
            name,
            tasks,
            f" ({parked} parked while the group rebalances)" if parked else "",
            stats.processed,
            rate,
            buffered,
            stats.skipped_replays,
            emitted or "nothing yet",
        )

    return log.maybe_log(now, stats.processed, stats.processed, line)


def describe_join(
    config: JoinConfig, tasks: Mapping[int, JoinTask], stats: JoinStats, intake: Mapping[str, int]
) -> dict[str, Any]:
    """The join's configuration, *tasks* and counters (JSON-ready); *intake*: the
    intake's counters, ``sought_back`` (fetched records it did not accept and
    sought back to) and ``holds`` (times a task's partitions were not fetched
    while its inbox was full).

    Per task: its decision time, watermarks, idle inputs, positions, buffered
    records, and its :class:`~streamjoin.join.activity.TaskActivity`: records
    ``processed``, ``processing`` (wall-clock seconds of its first and latest
    step here) and its recent ``stops``: the waits longer than
    :data:`~streamjoin.join.activity.STOP_SECONDS` between two records the
    task processed, whatever kept it waiting (a rebalance, a slow batch, an
    input with nothing to deliver)."""
    window = config.window
    return {
        "name": config.name,
        "left": config.left_topic,
        "right": config.right_topic,
        "partitions": config.partitions,
        "window": {"before": window.before, "after": window.after, "grace": window.grace},
        "changelog": config.changelog_topic,
        "outputs": dict(sorted(config.outputs.items())),
        "dead_letters": config.dead_letters,
        "tasks": {
            str(p): {
                "decision_time": t.logic.decision_time if t.logic else None,
                "watermarks": _watermarks(t.logic),
                "idle": sorted(t.idle),
                "position": dict(t.position),
                "buffered": t.waiting,
                **t.activity.as_dict(),
            }
            for p, t in sorted(tasks.items())
        },
        "stats": {**stats.as_dict(), **intake},
    }


def _watermarks(logic: TaskLogic | None) -> dict[str, int | None] | None:
    """Each input's watermark, when the policy's logic keeps them (streamjoin's do)."""
    marks = getattr(getattr(logic, "logic", None), "marks", None)
    return None if marks is None else dict(marks.marks)
