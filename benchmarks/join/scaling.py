"""Join benchmark, part 1b: how one worker's throughput grows with its partitions, and two workers.

Each run is a fresh consumer group of ``streamjoin.ads.app`` reading a whole
backlog of ``--impressions`` impressions and their clicks, timed like part 1
(from the first poll that sees a processed record to the first that sees them
all; the count is the sum over the run's workers):

* one worker, backlogs of 1 and 2 partitions (produced here);
* one worker, 4 partitions: part 1's figure (the same backlog and worker);
* two workers on the machine, in one group, on part 1's 4-partition backlog
  (two partitions each); both start together.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import ads
from benchmarks.harness.kafka import Backlog, create_topics, produce_backlog
from benchmarks.harness.report import fmt_rate, render_table, say
from benchmarks.harness.workers import BenchError, Workers, watch
from benchmarks.join.throughput import BACKLOG_JITTER_MS, ThroughputReport
from streamjoin.dev.broker import EmbeddedBroker

#: partition counts of the one-worker runs produced here (4 is part 1's)
SINGLE_WORKER_PARTITIONS = (1, 2)


@dataclass(frozen=True)
class ScalingRun:
    """One row of the scaling table."""

    label: str
    partitions: int
    workers: int
    records: int
    rate: float


def _produce(
    args: argparse.Namespace, broker: EmbeddedBroker, prefix: str, partitions: int
) -> Backlog:
    from streamjoin.ads import generator
    from streamjoin.ads.topics import AdTopics

    topics = AdTopics(prefix)
    config = generator.GeneratorConfig(
        seed=args.seed,
        impressions=args.impressions,
        jitter_ms=BACKLOG_JITTER_MS,
        malformed_rate=0.0,
        partitions=partitions,
        impressions_topic=topics.impressions,
        clicks_topic=topics.clicks,
    )
    asyncio.run(create_topics(broker.bootstrap, topics.inputs, partitions))
    return asyncio.run(produce_backlog(broker.bootstrap, config))


def _run_group(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    workdir: Path,
    name: str,
    app_id: str,
    prefix: str,
    partitions: int,
    workers: int,
    records: int,
) -> float:
    """Records/s of *workers* workers of one new group reading the backlog at *prefix*."""
    config = ads.settings(app_id, prefix, partitions, args.grace_ms)
    with Workers(ads.APP, broker, workdir, config.to_env()) as group:
        for i in range(workers):
            group.start(f"{name}-w{i}")

        def count() -> int | None:
            seen = [ads.join_processed(port) for port in group.ports.values()]
            known = [n for n in seen if n is not None]
            return sum(known) if known else None

        result = watch(name, group, count, records, args.timeout)
    return result.rate


def run_scaling(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    workdir: Path,
    run_id: str,
    tp: ThroughputReport,
) -> list[ScalingRun]:
    """The scaling table's runs (part 1's backlog and figure give the 4-partition rows)."""
    runs = []
    for partitions in SINGLE_WORKER_PARTITIONS:
        prefix = f"{run_id}-sc{partitions}-"
        say(f"scaling: one worker, {partitions} partition(s): producing the backlog ...")
        backlog = _produce(args, broker, prefix, partitions)
        if sum(backlog.ends.values()) != backlog.records:
            raise BenchError(f"scaling backlog of {partitions} partitions is incomplete")
        rate = _run_group(
            args, broker, workdir, f"scaling-{partitions}p", f"{run_id}-sc{partitions}",
            prefix, partitions, 1, backlog.records,
        )  # fmt: skip
        say(f"  {fmt_rate(rate)} records/s")
        runs.append(ScalingRun(f"1 worker, {partitions} partition(s)", partitions, 1,
                               backlog.records, rate))  # fmt: skip
    runs.append(
        ScalingRun(f"1 worker, {args.partitions} partitions (part 1)", args.partitions, 1,
                   tp.backlog.records, tp.streamjoin.rate)
    )  # fmt: skip
    say(f"scaling: two workers in one group on part 1's {args.partitions}-partition backlog ...")
    rate = _run_group(
        args, broker, workdir, "scaling-2w", f"{run_id}-sc2w", f"{run_id}-tp-",
        args.partitions, 2, tp.backlog.records,
    )  # fmt: skip
    say(f"  {fmt_rate(rate)} records/s")
    runs.append(
        ScalingRun(f"2 workers, {args.partitions} partitions", args.partitions, 2,
                   tp.backlog.records, rate)
    )  # fmt: skip
    return runs


def print_scaling(runs: list[ScalingRun], peer_rate: float | None) -> None:
    """The scaling table (and each rate over the faust peer's, when it ran)."""
    rows = []
    for run in runs:
        ratio = "" if not peer_rate else f"{run.rate / peer_rate:.0%}"
        rows.append([run.label, f"{run.records:,}", fmt_rate(run.rate), ratio])
    say(render_table(["join scaling", "records", "records/s", "/ peer (4 partitions)"], rows))
