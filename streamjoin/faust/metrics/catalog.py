"""Every metric a worker exposes on ``/metrics``: name, type, labels, meaning.

The one list the collectors (:mod:`streamjoin.faust.metrics.collect`), the
reference in docs/operations.rst, the Grafana dashboard and the alerting rules in
``docker/`` are checked against. Names follow Prometheus' rules: the
``streamjoin_`` prefix, base units (seconds, bytes, records), ``_total`` on
counters. Every metric carries the ``app`` label (the faust app's id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["METRICS", "Metric", "by_name"]

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True)
class Metric:
    """One metric family: its full name (counters with ``_total``), type, labels
    besides ``app``, and what it means."""

    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str


def _m(name: str, kind: Kind, labels: tuple[str, ...], help: str) -> Metric:
    return Metric(f"streamjoin_{name}", kind, labels, help)


METRICS: tuple[Metric, ...] = (
    # -- joins: counters since the worker started, per join ---------------------------
    _m(
        "join_input_records_total",
        "counter",
        ("join", "input"),
        "records the join received from each input topic",
    ),
    _m(
        "join_task_records_total",
        "counter",
        ("join", "task"),
        "records a task applied on this worker since it opened here",
    ),
    _m(
        "join_outputs_total",
        "counter",
        ("join", "kind"),
        "outcomes the join emitted, by kind (its output names)",
    ),
    _m(
        "join_dead_letters_total",
        "counter",
        ("join", "reason"),
        "records the join sent to its dead-letter topic, by reason (late, malformed)",
    ),
    _m(
        "join_changelog_records_total",
        "counter",
        ("join",),
        "changelog records the join's batches wrote",
    ),
    _m(
        "join_batches_abandoned_total",
        "counter",
        ("join",),
        "batches given up before they were durable (rebalance, lease lapse, owner change)",
    ),
    _m(
        "join_lease_lapses_total",
        "counter",
        ("join",),
        "times the session lease ran out while a batch waited (its writes refused)",
    ),
    _m(
        "join_batch_seconds",
        "histogram",
        ("join",),
        "wall-clock seconds of each batch, from its first record to durable",
    ),
    _m("join_batch_records", "histogram", ("join",), "input records applied by each batch"),
    _m(
        "join_task_stop_seconds",
        "histogram",
        ("join",),
        "waits longer than 0.25 s between two records a task processed",
    ),
    # -- joins: gauges read at scrape time, per task ----------------------------------
    _m(
        "join_watermark_seconds",
        "gauge",
        ("join", "task", "input"),
        "each input's watermark (event time, seconds since the epoch)",
    ),
    _m(
        "join_event_time_lag_seconds",
        "gauge",
        ("join", "task", "input"),
        "wall clock minus the input's watermark",
    ),
    _m(
        "join_decision_lag_seconds",
        "gauge",
        ("join", "task"),
        "wall clock minus the task's decision time (everything before it is decided)",
    ),
    _m("join_buffered_records", "gauge", ("join", "task"), "records received and not yet applied"),
    _m(
        "join_pending_records",
        "gauge",
        ("join", "task"),
        "records held in the task's state, not yet decided",
    ),
    _m(
        "join_state_bytes",
        "gauge",
        ("join", "task"),
        "RocksDB's estimate of the task's state: live data in its files plus memtables",
    ),
    _m(
        "consumer_lag_records",
        "gauge",
        ("topic", "partition"),
        "high watermark minus the consumer's position, per assigned input partition",
    ),
    # -- restoration -------------------------------------------------------------------
    _m(
        "restore_remaining_records",
        "gauge",
        ("topic", "partition"),
        "changelog records an active restore still has to apply (0 once restored)",
    ),
    _m(
        "restore_records_total",
        "counter",
        ("topic", "partition"),
        "changelog records applied by active restores",
    ),
    _m(
        "replica_lag_records",
        "gauge",
        ("topic", "partition", "kind"),
        "records a standby, warm-up or global table partition is behind its changelog's end",
    ),
    _m("tasks", "gauge", ("kind",), "tasks this worker owns: active, standby, warmup"),
    # -- assignment and rebalances -----------------------------------------------------
    _m("assignment_generation", "gauge", (), "generation of the assignment this worker runs"),
    _m(
        "rebalances_total",
        "counter",
        ("kind",),
        "rebalances this worker went through: eager, cooperative, lost (membership lost)",
    ),
    _m(
        "rebalance_seconds",
        "histogram",
        (),
        "seconds from this worker's JoinGroup to the assignment it got",
    ),
    _m(
        "rebalance_tasks_total",
        "counter",
        ("outcome",),
        "tasks at rebalances: kept, gained, lost by this worker",
    ),
    _m("assignment_seconds", "histogram", (), "seconds the leader took to compute an assignment"),
    # the worker that made the group's last assignment (others do not report these)
    _m(
        "group_generation",
        "gauge",
        (),
        "generation of the last assignment this worker made as the leader",
    ),
    _m(
        "group_members",
        "gauge",
        (),
        "members in the last assignment this worker made as the leader",
    ),
    _m("group_tasks", "gauge", ("kind",), "tasks in that assignment: all, stateful"),
    _m(
        "group_assignment_tasks",
        "gauge",
        ("state",),
        "in that assignment: moved, held_back, withheld, warmups, cross_rack tasks",
    ),
    _m(
        "group_protocol",
        "gauge",
        ("protocol",),
        "1 for that assignment's rebalance protocol (eager, cooperative, mixed)",
    ),
    # -- the page itself ----------------------------------------------------------------
    _m(
        "scrape_errors_total",
        "counter",
        ("part",),
        "parts left out of a scrape because they failed to read (joins, consumer, ...)",
    ),
)


def by_name() -> dict[str, Metric]:
    """The catalogue by metric name."""
    return {m.name: m for m in METRICS}
