"""What a join reports about itself: counters, progress log lines, the web page's view.

:class:`JoinStats` counts what one join did on this worker since it started;
:class:`ProgressLog` turns the counters into a rate-limited log line;
:func:`describe_join` is the JSON served on the worker's joins page
(:mod:`streamjoin.faust.web`). Reading them never changes a join.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamjoin.faust.join.tasks import SIDES, JoinTask

if TYPE_CHECKING:
    from streamjoin.faust.join.operator import Join

__all__ = ["JoinStats", "ProgressLog", "describe_join"]


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
    #: tasks opened here (indexes rebuilt from RocksDB), and parked tasks that went
    #: on after a rebalance without reopening
    tasks_opened: int = 0
    tasks_kept: int = 0
    #: batches abandoned before they were durable (a rebalance began, the session
    #: lease ran out or a task's owner token changed), and lapses of the lease
    batches_abandoned: int = 0
    lease_lapses: int = 0

    def as_dict(self) -> dict[str, Any]:
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
        }


class ProgressLog:
    """Logs a join's progress at most once per interval, and only when it processed records."""

    def __init__(self, logger: logging.Logger, name: str) -> None:
        self._logger = logger
        self._name = name
        self._logged_at = time.monotonic()
        self._logged_n = 0

    def maybe_log(
        self,
        now: float,
        interval: float,
        stats: JoinStats,
        tasks: int,
        buffered: int,
        parked: int = 0,
    ) -> None:
        """Log a line if *interval* seconds passed since the last one and records were
        processed; *parked* tasks wait for a rebalance to end (see JoinTask.park)."""
        if now - self._logged_at >= interval and stats.processed != self._logged_n:
            self._log(now, stats, tasks, buffered, parked)

    def _log(self, now: float, stats: JoinStats, tasks: int, buffered: int, parked: int) -> None:
        rate = (stats.processed - self._logged_n) / max(now - self._logged_at, 1e-9)
        self._logged_at, self._logged_n = now, stats.processed
        emitted = ", ".join(f"{k} {v}" for k, v in sorted(stats.emitted.items()))
        self._logger.info(
            "join %s: %d tasks%s, %d records processed (%.0f/s), %d buffered, "
            "%d skipped replays; out: %s",
            self._name,
            tasks,
            f" ({parked} parked while the group rebalances)" if parked else "",
            stats.processed,
            rate,
            buffered,
            stats.skipped_replays,
            emitted or "nothing yet",
        )


def describe_join(join: Join, tasks: Mapping[int, JoinTask]) -> dict[str, Any]:
    """The join's configuration, *tasks* and counters (JSON-ready)."""
    window = join.policy.window
    return {
        "name": join.name,
        "left": join.left_topic,
        "right": join.right_topic,
        "partitions": join.partitions,
        "window": {"before": window.before, "after": window.after, "grace": window.grace},
        "changelog": join.changelog_topic,
        "outputs": {k: v.get_topic_name() for k, v in sorted(join.outputs.items())},
        "dead_letters": join.dead_letters.get_topic_name(),
        "tasks": {
            str(p): {
                "decision_time": t.logic.decision_time if t.logic else None,
                "watermarks": _watermarks(t.logic),
                "idle": sorted(t.idle),
                "position": dict(t.position),
                "buffered": t.waiting,
            }
            for p, t in sorted(tasks.items())
        },
        "stats": {**join.stats.as_dict(), "sought_back": join.intake.sought_back},
    }


def _watermarks(logic: Any) -> dict[str, int | None] | None:
    """Each input's watermark, when the policy's logic keeps them (streamjoin's do)."""
    marks = getattr(getattr(logic, "logic", None), "marks", None)
    return None if marks is None else dict(marks.marks)
