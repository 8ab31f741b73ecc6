"""The worker's metrics, read at scrape time (a ``prometheus_client`` collector).

Nothing here runs per record: counters are the runtime's own (``JoinStats``, the
assignor's rebalance counts), histograms are its :class:`~streamjoin._histogram.Buckets`
(observed once per batch, stop or rebalance), gauges are read from the joins,
the restorer and the assignor when Prometheus scrapes. Every family is declared
in :mod:`.catalog`; a part that fails to read (a rebalance tearing a task down
under the scrape) is left out of that scrape and counted in
``streamjoin_scrape_errors_total``, so the endpoint always answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from streamjoin._histogram import Buckets
from streamjoin.faust.metrics.catalog import by_name
from streamjoin.join.policy import DEAD_LETTER

if TYPE_CHECKING:
    from faust.types import AppT

__all__ = ["StreamjoinCollector"]

logger = logging.getLogger(__name__)

#: the output the router counts dead letters under: not an output kind here (they
#: are join_dead_letters_total, by reason)
_DEAD_LETTER = DEAD_LETTER


class _Families:
    """The families of one scrape, created from the catalogue on first use."""

    def __init__(self, app_id: str) -> None:
        self.app_id = app_id
        self.catalog = by_name()
        self.made: dict[str, Metric] = {}

    def _family(self, name: str) -> Metric:
        family = self.made.get(name)
        if family is None:
            spec = self.catalog[name]
            labels = ["app", *spec.labels]
            base = name.removesuffix("_total") if spec.kind == "counter" else name
            kind = {
                "counter": CounterMetricFamily,
                "gauge": GaugeMetricFamily,
                "histogram": HistogramMetricFamily,
            }[spec.kind]
            family = self.made[name] = kind(base, spec.help, labels=labels)
        return family

    def add(self, name: str, labels: Iterable[object], value: float) -> None:
        family = self._family(name)
        values = [self.app_id, *map(str, labels)]
        family.add_metric(values, value)  # type: ignore[attr-defined]

    def histogram(self, name: str, labels: Iterable[object], buckets: Buckets) -> None:
        family = self._family(name)
        values = [self.app_id, *map(str, labels)]
        family.add_metric(values, buckets.cumulative(), buckets.sum)  # type: ignore[attr-defined]


class StreamjoinCollector:
    """Reads a faust app's joins, restorer and assignor into metric families."""

    def __init__(self, app: AppT, clock: Callable[[], float] = time.time) -> None:
        self.app = app
        self.clock = clock
        #: records applied by active restores, per partition, summed over restores
        self._restored: dict[tuple[str, int], int] = {}
        self._restore_seen: dict[tuple[str, int], int] = {}
        #: parts that failed to read, by part (since the worker started)
        self.errors: dict[str, int] = {}

    def describe(self) -> list[Metric]:
        """Nothing up front: families appear as the runtime has figures for them."""
        return []

    def collect(self) -> Iterator[Metric]:
        families = _Families(str(self.app.conf.id))
        now = self.clock()
        parts: list[tuple[str, Callable[[_Families, float], None]]] = [
            ("joins", self._joins),
            ("consumer", self._consumer_lag),
            ("restore", self._restore),
            ("assignment", self._assignment),
        ]
        for part, read in parts:
            try:
                read(families, now)
            except Exception:
                self.errors[part] = self.errors.get(part, 0) + 1
                logger.debug("streamjoin: metrics part %s failed this scrape", part, exc_info=True)
        for part, count in sorted(self.errors.items()):
            families.add("streamjoin_scrape_errors_total", (part,), count)
        yield from families.made.values()

    # -- joins ------------------------------------------------------------------------

    def _joins(self, out: _Families, now: float) -> None:
        joins: Mapping[str, Any] = dict(getattr(self.app, "joins", {}) or {})
        for name in sorted(joins):
            join = joins[name]
            stats, config = join.stats, join.config
            inputs = {"left": config.left_topic, "right": config.right_topic}
            for side, count in sorted(dict(stats.received).items()):
                out.add(
                    "streamjoin_join_input_records_total", (name, inputs.get(side, side)), count
                )
            for kind, count in sorted(dict(stats.emitted).items()):
                if kind != _DEAD_LETTER:
                    out.add("streamjoin_join_outputs_total", (name, kind), count)
            out.add("streamjoin_join_dead_letters_total", (name, "late"), stats.late)
            out.add("streamjoin_join_dead_letters_total", (name, "malformed"), stats.bad)
            out.add("streamjoin_join_changelog_records_total", (name,), stats.changelog_records)
            out.add("streamjoin_join_batches_abandoned_total", (name,), stats.batches_abandoned)
            out.add("streamjoin_join_lease_lapses_total", (name,), stats.lease_lapses)
            out.histogram("streamjoin_join_batch_seconds", (name,), stats.batch_seconds)
            out.histogram("streamjoin_join_batch_records", (name,), stats.batch_records)
            out.histogram("streamjoin_join_task_stop_seconds", (name,), stats.task_stops)
            self._tasks(out, now, name, join, inputs)

    def _tasks(
        self, out: _Families, now: float, name: str, join: Any, inputs: Mapping[str, str]
    ) -> None:
        live = dict(join.tasks.live)
        for partition in sorted(live):
            task = live[partition]
            out.add(
                "streamjoin_join_task_records_total", (name, partition), task.activity.processed
            )
            out.add("streamjoin_join_buffered_records", (name, partition), task.waiting)
            logic = task.logic
            if logic is None:
                continue
            marks = getattr(getattr(logic, "logic", None), "marks", None)
            for side, mark in sorted(dict(getattr(marks, "marks", {}) or {}).items()):
                if mark is None:
                    continue
                labels = (name, partition, inputs.get(side, side))
                out.add("streamjoin_join_watermark_seconds", labels, mark / 1000)
                out.add("streamjoin_join_event_time_lag_seconds", labels, now - mark / 1000)
            decided = logic.decision_time
            if decided is not None:
                out.add(
                    "streamjoin_join_decision_lag_seconds", (name, partition), now - decided / 1000
                )
            # policies that count what they hold (the ad policy) say so
            pending = getattr(getattr(logic, "logic", None), "pending", None)
            if isinstance(pending, int):
                out.add("streamjoin_join_pending_records", (name, partition), pending)
        for partition, size in sorted(join.state_sizes().items()):
            out.add("streamjoin_join_state_bytes", (name, partition), size)

    def _consumer_lag(self, out: _Families, now: float) -> None:
        """High watermark minus the join's position, per input partition of a live task."""
        from faust.types import TP

        consumer = self.app.consumer
        joins: Mapping[str, Any] = dict(getattr(self.app, "joins", {}) or {})
        for name in sorted(joins):
            join = joins[name]
            inputs = {"left": join.config.left_topic, "right": join.config.right_topic}
            live = dict(join.tasks.live)
            for partition in sorted(live):
                for side, topic in sorted(inputs.items()):
                    position = live[partition].position.get(side)
                    highwater = consumer.highwater(TP(topic, partition))
                    if position is None or highwater is None:
                        continue
                    lag = max(0, highwater - position)
                    out.add("streamjoin_consumer_lag_records", (topic, partition), lag)

    # -- restoration ------------------------------------------------------------------

    def _restore(self, out: _Families, now: float) -> None:
        recovery = getattr(getattr(self.app, "tables", None), "recovery", None)
        if recovery is None or not hasattr(recovery, "restore_remaining"):
            return
        for (topic, partition), left in sorted(recovery.restore_remaining().items()):
            out.add("streamjoin_restore_remaining_records", (topic, partition), left)
        for key, count in sorted(recovery.restore_counts().items()):
            # a count is the latest restore's: a new restore starts it again
            seen = self._restore_seen.get(key)
            if seen != count:
                grown = count - seen if seen is not None and count >= seen else count
                self._restored[key] = self._restored.get(key, 0) + grown
                self._restore_seen[key] = count
        for (topic, partition), total in sorted(self._restored.items()):
            out.add("streamjoin_restore_records_total", (topic, partition), total)
        describe = getattr(self.app.assignor, "describe", None)
        page = describe() if describe is not None else {}
        warmups = set(_tps(page.get("warmups", {})))
        globals_ = {(t, p) for t, p in dict(recovery.global_offsets())}
        for (topic, partition), lag in sorted(recovery.changelog_lags().items()):
            if lag is None:
                continue
            kind = (
                "warmup" if (topic, partition) in warmups
                else "global" if (topic, partition) in globals_
                else "standby"
            )  # fmt: skip
            out.add("streamjoin_replica_lag_records", (topic, partition, kind), lag)

    # -- assignment -------------------------------------------------------------------

    def _assignment(self, out: _Families, now: float) -> None:
        assignor: Any = self.app.assignor  # streamjoin's, when it has describe()
        describe = getattr(assignor, "describe", None)
        if describe is None:
            return
        page = describe()
        for kind, owned in (("active", page["actives"]), ("standby", page["standbys"]),
                            ("warmup", page["warmups"])):  # fmt: skip
            tasks = {(_group(assignor, t), p) for t, parts in owned.items() for p in parts}
            out.add("streamjoin_tasks", (kind,), len(tasks))
        if page.get("generation") is not None:
            out.add("streamjoin_assignment_generation", (), page["generation"])
        for kind, count in sorted(assignor.rebalance_kinds.items()):
            out.add("streamjoin_rebalances_total", (kind,), count)
        out.histogram("streamjoin_rebalance_seconds", (), assignor.rebalance_seconds)
        for outcome, count in sorted(assignor.partition_outcomes.items()):
            out.add("streamjoin_rebalance_tasks_total", (outcome,), count)
        out.histogram("streamjoin_assignment_seconds", (), assignor.assignment_seconds)
        led = page.get("led") or {}
        if "members" not in led:
            return
        out.add("streamjoin_group_generation", (), led["generation"])
        out.add("streamjoin_group_members", (), led["members"])
        out.add("streamjoin_group_tasks", ("all",), led.get("tasks", 0))
        out.add("streamjoin_group_tasks", ("stateful",), led.get("stateful_tasks", 0))
        for state, key in (("moved", "moved"), ("held_back", "held_back"),
                           ("withheld", "withheld"), ("warmups", "warmups"),
                           ("cross_rack", "cross_rack_tasks")):  # fmt: skip
            out.add("streamjoin_group_assignment_tasks", (state,), led.get(key, 0))
        protocol = led.get("protocol")
        if protocol is not None:
            out.add("streamjoin_group_protocol", (protocol,), 1)


def _group(assignor: Any, topic: str) -> object:
    """The task group of *topic* (a task is one partition of a group), or the topic."""
    try:
        return assignor.group_for_topic(topic)
    except KeyError:
        return topic


def _tps(by_topic: Mapping[str, Iterable[int]]) -> Iterator[tuple[str, int]]:
    for topic, parts in dict(by_topic).items():
        for p in parts:
            yield topic, p
