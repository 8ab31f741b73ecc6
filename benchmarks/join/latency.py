"""Join benchmark, part 2: end-to-end latency of one streamjoin worker at a paced rate.

The generator's events are produced in real time (event time = wall clock) while the
three outcome topics are consumed here; a click's latency is the time its outcome
arrived (or was stamped by the join's producer) minus the time the click was
produced (see ``__main__.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import ads
from benchmarks.harness.kafka import create_topics, send_paced
from benchmarks.harness.measure import LatencySummary, percentile
from benchmarks.harness.report import Progress, render_table, say, verdict
from benchmarks.harness.workers import BenchError, running
from streamjoin.dev.broker import EmbeddedBroker, free_port

#: the p99 target: at most the grace plus this, at every rate (issue 38: 0.5 s at
#: 4,000 and 20,000 records/s; issue 14 asked 0.5 s at 1,000 and 1 s at 4,000)
LATENCY_MARGIN_MS = 500
#: the rates ``make bench-join`` measures latency at, records/s (issue 14's and 38's)
DEFAULT_RATES = (1_000.0, 4_000.0, 20_000.0)


def latency_rate(
    streamjoin_rate: float | None, cap: float | None, share: float = 0.5
) -> float | None:
    """Records/s of the latency run: ``share`` of the measured rate, at most *cap*.

    ``None`` when neither is known (the caller rejects that combination).
    """
    candidates = []
    if streamjoin_rate is not None and not math.isnan(streamjoin_rate):
        candidates.append(streamjoin_rate * share)
    if cap is not None:
        candidates.append(cap)
    return min(candidates) if candidates else None


@dataclass
class Traffic:
    """What one latency run sent and received."""

    #: click id -> wall time (s) it was produced, for the measured clicks
    sent: dict[str, float] = field(default_factory=dict)
    #: click id -> (wall time (s) its outcome was received, outcome Kafka timestamp ms)
    received: dict[str, tuple[float, int]] = field(default_factory=dict)
    records: int = 0
    #: how far the producer fell behind its schedule at worst
    behind_ms: float = 0.0
    #: sampled every second: wall clock minus the join's smallest task decision time
    stream_lag_ms: list[float] = field(default_factory=list)
    #: sampled every second: records received and not yet applied
    buffered: list[int] = field(default_factory=list)
    join_stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class LatencyReport:
    record_rate: float
    impression_rate: float
    grace_ms: int
    jitter_ms: int
    seconds: float
    traffic: Traffic
    #: the least latency of the measured clicks any correct join could give
    floor: LatencySummary | None = None

    def latencies(self, *, stamped: bool) -> list[float]:
        """Milliseconds from each click's production to its outcome (received or stamped)."""
        got = self.traffic.received
        if stamped:
            return [got[c][1] - t * 1000 for c, t in self.traffic.sent.items() if c in got]
        return [(got[c][0] - t) * 1000 for c, t in self.traffic.sent.items() if c in got]

    @property
    def received(self) -> LatencySummary | None:
        values = self.latencies(stamped=False)
        return LatencySummary.of(values) if values else None

    @property
    def stamped(self) -> LatencySummary | None:
        values = self.latencies(stamped=True)
        return LatencySummary.of(values) if values else None

    @property
    def missing(self) -> int:
        return sum(1 for c in self.traffic.sent if c not in self.traffic.received)

    @property
    def target_ms(self) -> int:
        return self.grace_ms + LATENCY_MARGIN_MS

    @property
    def ok(self) -> bool:
        summary = self.received
        return summary is not None and summary.p99 <= self.target_ms


def decision_floor_ms(config: Any, grace_ms: int, measured_until_ms: int) -> list[float]:
    """Each measured click's latency with no delay at all but the join's rules.

    The generator's events are replayed in arrival order (the order and time
    they are produced) through each partition's per-input watermarks: a
    click's outcome is final at the arrival of the first record that lifts
    its task's decision time (the lower watermark) past ``click.ts + grace``.
    That minus the click's own arrival is the least latency any join that
    decides correctly under these rules could give, whatever its speed.
    """
    from streamjoin.ads import generator
    from streamjoin.ads.generator.core import partition_for_key

    marks: dict[int, dict[str, int]] = {}
    decided: dict[int, int] = {}
    waiting: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
    floor: list[float] = []
    for event in generator.generate(config):
        task = partition_for_key(event.key, config.partitions)
        mark = marks.setdefault(task, {})
        mark[event.topic] = max(mark.get(event.topic, event.timestamp_ms), event.timestamp_ms)
        if event.topic == config.clicks_topic and event.timestamp_ms <= measured_until_ms:
            waiting[task].append((event.timestamp_ms + grace_ms, event.arrival_ms))
        if len(mark) < 2:
            continue
        decided[task] = max(decided.get(task, 0), min(mark.values()))
        due = waiting[task]
        if due and min(d for d, _ in due) < decided[task]:
            floor.extend(event.arrival_ms - a for d, a in due if d < decided[task])
            waiting[task] = [(d, a) for d, a in due if d >= decided[task]]
    return floor


def records_per_impression(seed: int) -> float:
    """Records per impression of the generator's defaults (a 20,000-impression sample)."""
    from streamjoin.ads import generator

    config = generator.GeneratorConfig(
        seed=seed, impressions=20_000, malformed_rate=0.0, tail=False
    )
    return sum(1 for _ in generator.generate(config)) / 20_000


def _join_sample(port: int) -> tuple[float | None, int | None, dict[str, Any]]:
    """(wall ms - smallest task decision time, records buffered, stats) of the join at *port*."""
    doc = ads.join_doc(port)
    now_ms = time.time() * 1000
    try:
        join = doc[ads.JOIN_NAME]  # type: ignore[index]
        times = [t["decision_time"] for t in join["tasks"].values() if t["decision_time"]]
        buffered = sum(int(t["buffered"]) for t in join["tasks"].values())
        return (now_ms - min(times) if times else None), buffered, dict(join["stats"])
    except (KeyError, TypeError, ValueError):
        return None, None, {}


async def _latency_traffic(
    bootstrap: str,
    config: Any,
    measured_until_ms: int,
    outcome_topics: Sequence[str],
    partitions: int,
    join_port: int,
    wait_s: float,
) -> Traffic:
    """Produce *config* paced on the wall clock while consuming the outcomes."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from streamjoin.ads import generator

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2)
    await consumer.start()
    await producer.start()
    traffic = Traffic()
    stop = asyncio.Event()

    async def consume() -> None:
        tps = [TopicPartition(t, p) for t in outcome_topics for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100)
            now = time.time()
            for records in batch.values():
                for r in records:
                    if r.key is not None:
                        traffic.received.setdefault(r.key.decode(), (now, r.timestamp))

    async def sample() -> None:
        while not stop.is_set():
            lag, buffered, stats = await asyncio.to_thread(_join_sample, join_port)
            if lag is not None:
                traffic.stream_lag_ms.append(lag)
            if buffered is not None:
                traffic.buffered.append(buffered)
            if stats:
                traffic.join_stats = stats
            await asyncio.sleep(1.0)

    helpers = [asyncio.create_task(consume()), asyncio.create_task(sample())]
    sent = traffic.sent

    def note_click(event: Any) -> None:  # Any: a generator event
        if event.topic == config.clicks_topic and event.timestamp_ms <= measured_until_ms:
            sent[json.loads(event.value)["click_id"]] = time.time()

    try:
        started = time.monotonic()
        progress = Progress(started)
        # event time is wall clock: each event is sent at its own time
        async for _, _, late_s in send_paced(producer, generator.generate(config), note_click):
            traffic.behind_ms = max(traffic.behind_ms, late_s * 1000)
            traffic.records += 1
            now = time.monotonic()
            if progress.due(now):
                done = sum(1 for c in sent if c in traffic.received)
                lag = traffic.stream_lag_ms[-1] if traffic.stream_lag_ms else math.nan
                say(
                    f"  {now - started:.0f}s: {traffic.records:,} records sent, "
                    f"{done:,}/{len(sent):,} clicks have their outcome, "
                    f"join decision time {lag:,.0f} ms behind the wall clock"
                )
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(c not in traffic.received for c in sent):
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await asyncio.gather(*helpers, return_exceptions=True)
        await producer.stop()
        await consumer.stop()
    return traffic


def run_latency(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    workdir: Path,
    run_id: str,
    record_rate: float,
    per_impression: float,
) -> LatencyReport:
    prefix = f"{run_id}-lat{record_rate:.0f}-"
    grace, jitter = args.latency_grace_ms, args.latency_jitter_ms
    impression_rate = record_rate / per_impression
    say(
        f"latency: {record_rate:,.0f} records/s ({impression_rate:,.0f} impressions/s) for "
        f"{args.latency_seconds:g}s, grace {grace} ms, jitter {jitter} ms ..."
    )
    config = ads.settings(f"{run_id}-lat{record_rate:.0f}", prefix, args.partitions, grace)
    topics = config.topics
    outcome_topics = list(topics.outcomes)
    asyncio.run(create_topics(broker.bootstrap, [*topics.inputs, *outcome_topics], args.partitions))
    port = free_port()
    process = ads.ads_worker(broker, workdir, f"latency-{record_rate:.0f}", config, port)
    with running(process):
        try:
            process.wait_for_log(r"tables restored:", args.timeout)
            process.wait_for_log(r"\[\^Worker\]: Ready", args.timeout)
        except TimeoutError as exc:
            raise BenchError(
                f"latency worker not ready: {exc}; its log: {process.log_path}"
            ) from exc
        time.sleep(1.0)  # let the agents take their first fetch
        # decisions need decision time past click.ts + grace: run on long enough
        # after the measured span that the last measured clicks are decided
        extra_ms = grace + jitter + 2_000
        start_ms = int(time.time() * 1000) + 200
        measured_ms = round(args.latency_seconds * 1000)
        traffic_config = ads.paced_traffic(
            config, args.seed, start_ms, measured_ms + extra_ms, impression_rate, jitter
        )
        traffic = asyncio.run(
            _latency_traffic(
                broker.bootstrap,
                traffic_config,
                start_ms + measured_ms,
                outcome_topics,
                args.partitions,
                port,
                wait_s=30.0,
            )
        )
    floor = decision_floor_ms(traffic_config, grace, start_ms + measured_ms)
    return LatencyReport(
        floor=LatencySummary.of(floor) if floor else None,
        record_rate=record_rate,
        impression_rate=impression_rate,
        grace_ms=grace,
        jitter_ms=jitter,
        seconds=args.latency_seconds,
        traffic=traffic,
    )


def print_latency(report: LatencyReport) -> None:
    rows = []
    for name, s in (
        ("click produced -> outcome received", report.received),
        ("click produced -> outcome timestamp", report.stamped),
    ):
        if s is None:
            continue
        rows.append(
            [
                name,
                f"{s.count:,}",
                f"{s.p50:,.0f}",
                f"{s.p95:,.0f}",
                f"{s.p99:,.0f}",
                f"{s.max:,.0f}",
            ]
        )
    say(render_table(["latency (ms)", "clicks", "p50", "p95", "p99", "max"], rows))
    t = report.traffic
    say(
        f"{t.records:,} records sent at {report.record_rate:,.0f}/s, "
        f"{len(t.sent):,} clicks measured, {report.missing:,} without an outcome; "
        f"the producer fell behind its schedule by {t.behind_ms:,.0f} ms at worst"
    )
    if t.stream_lag_ms:
        say(
            f"join decision time behind the wall clock (sampled each second): median "
            f"{percentile(t.stream_lag_ms, 50):,.0f} ms, max {max(t.stream_lag_ms):,.0f} ms; "
            f"records held in the join: median {percentile(t.buffered, 50):,.0f}, "
            f"max {max(t.buffered):,}"
        )
    if t.join_stats:
        say(ads.stats_line(t.join_stats))
    low = report.grace_ms - report.jitter_ms
    say(
        f"an outcome is final only once decision time passes click.ts + grace ({report.grace_ms} "
        f"ms), so latencies of about the grace (from grace - jitter = {low} ms up) are expected"
    )
    if report.floor is not None:
        f = report.floor
        say(
            f"the least latency any correct join could give this traffic (its rules, no "
            f"delay at all): p50/p95/p99 {f.p50:,.0f}/{f.p95:,.0f}/{f.p99:,.0f} ms"
        )
    if report.received is not None:
        say(
            f"p99 {report.received.p99:,.0f} ms (target <= grace + "
            f"{LATENCY_MARGIN_MS / 1000:g} s = {report.target_ms:,} ms): "
            f"{verdict(report.ok)}"
        )


def summary_rows(lat: LatencyReport) -> list[list[str]]:
    """The summary's latency rows: figure, value, target, verdict."""
    rows = []
    at = f"at {lat.record_rate:,.0f}/s"
    if lat.received is not None:
        r = lat.received
        rows.append([f"latency p50 / p95 ms {at}", f"{r.p50:,.0f} / {r.p95:,.0f}", "", ""])
        rows.append(
            [
                f"latency p99 ms {at} (grace {lat.grace_ms} ms)",
                f"{r.p99:,.0f}",
                f"<= {lat.target_ms:,}",
                verdict(lat.ok),
            ]
        )
        rows.append([f"latency max ms {at}", f"{r.max:,.0f}", "", ""])
        if lat.floor is not None:
            rows.append(
                [f"latency p99 floor ms {at} (rules alone)", f"{lat.floor.p99:,.0f}", "", ""]
            )
        late = int(lat.traffic.join_stats.get("late", 0))
        rows.append([f"late records (latency {at})", f"{late:,}", "0", verdict(late == 0)])
        rows.append(
            [f"clicks without an outcome {at}", f"{lat.missing:,}", "0", verdict(not lat.missing)]
        )
    else:
        rows.append(
            [f"latency {at}: clicks with an outcome", "0", f"{len(lat.traffic.sent):,}", "NOT met"]
        )
    return rows
