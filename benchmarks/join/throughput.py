"""Join benchmark, part 1: throughput of one streamjoin worker against a count-only faust peer.

A backlog of the generator's impressions and their clicks is produced to fresh
topics; then, one after the other and each with its own consumer group, the peer
(``peer_app.py``), one worker of ``streamjoin.ads.app`` and the peer again read
all of it while their counts are polled (see ``__main__.py``); the faster of
the peer's two passes is the one streamjoin is compared with.
"""

from __future__ import annotations

import argparse
import asyncio
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import ads
from benchmarks.harness.kafka import Backlog, create_topics, produce_backlog
from benchmarks.harness.measure import Throughput
from benchmarks.harness.report import fmt_rate, render_table, say, verdict
from benchmarks.harness.workers import BenchError, http_json, running, watch, worker
from streamjoin.dev.broker import LOOPBACK, EmbeddedBroker, free_port

#: the count-only faust peer
PEER_APP = "benchmarks.join.peer_app:app"
#: streamjoin's records/s over the peer's (issue 14: at least the peer's)
THROUGHPUT_RATIO_TARGET = 1.00
#: the backlog's generator jitter (its default); the throughput run's grace must cover it
BACKLOG_JITTER_MS = 2_000


@dataclass
class ThroughputReport:
    backlog: Backlog
    peer: Throughput | None
    streamjoin: Throughput
    join_stats: dict[str, Any]
    #: every pass of the peer (before and after streamjoin); ``peer`` is the faster
    peer_runs: list[Throughput] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        """streamjoin / peer records/s."""
        if self.peer is None or math.isnan(self.peer.rate) or math.isnan(self.streamjoin.rate):
            return None
        return self.streamjoin.rate / self.peer.rate


def peer_processed(port: int) -> int | None:
    """The peer's count on the worker at *port*."""
    doc = http_json(f"http://{LOOPBACK}:{port}/bench/count/")
    try:
        return int(doc["processed"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None


def run_throughput(
    args: argparse.Namespace, broker: EmbeddedBroker, workdir: Path, run_id: str
) -> ThroughputReport:
    from streamjoin.ads import generator

    prefix = f"{run_id}-tp-"
    config = ads.settings(f"{run_id}-sj", prefix, args.partitions, args.grace_ms)
    topics = config.topics
    backlog_config = generator.GeneratorConfig(
        seed=args.seed,
        impressions=args.impressions,
        jitter_ms=BACKLOG_JITTER_MS,
        malformed_rate=0.0,
        partitions=args.partitions,
        impressions_topic=topics.impressions,
        clicks_topic=topics.clicks,
    )
    asyncio.run(create_topics(broker.bootstrap, topics.inputs, args.partitions))
    say(f"producing the backlog: {args.impressions:,} impressions and their clicks ...")
    backlog = asyncio.run(produce_backlog(broker.bootstrap, backlog_config))
    say(
        f"  {backlog.records:,} records ({backlog.impressions:,} impressions, "
        f"{backlog.clicks:,} clicks) in {backlog.seconds:.1f}s "
        f"({backlog.records / backlog.seconds:,.0f}/s)"
    )
    ends = sum(backlog.ends.values())
    if ends != backlog.records:
        raise BenchError(f"the topics end at {ends:,} records, {backlog.records:,} were produced")

    peers: list[Throughput] = []
    if not args.skip_peer:
        say("(a) faust peer: a plain faust.App counting both topics, one worker ...")
        peers.append(_run_peer(args, broker, workdir, run_id, prefix, backlog, "peer"))

    say(f"(b) streamjoin: one worker of streamjoin.ads.app (grace {args.grace_ms} ms) ...")
    port = free_port()
    process = ads.ads_worker(broker, workdir, "streamjoin", config, port)
    with running(process):
        ours = watch(
            "streamjoin", process, lambda: ads.join_processed(port), backlog.records, args.timeout
        )
        join_stats = ads.join_stats(port)
    say(f"  streamjoin: {fmt_rate(ours.rate)} records/s")
    if not args.skip_peer:
        # the machine's load changes during a run: the peer again, after the
        # join, and the faster of its two passes is the one compared
        say("(c) faust peer again (its own new group), after streamjoin ...")
        peers.append(_run_peer(args, broker, workdir, run_id, prefix, backlog, "peer-again"))
    peer = max(peers, key=lambda r: 0.0 if math.isnan(r.rate) else r.rate, default=None)
    return ThroughputReport(backlog, peer, ours, join_stats, peers)


def _run_peer(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    workdir: Path,
    run_id: str,
    prefix: str,
    backlog: Backlog,
    name: str,
) -> Throughput:
    """One pass of the faust peer over the backlog, in a consumer group of its own."""
    port = free_port()
    env = {"SJ_BENCH_APP_ID": f"{run_id}-{name}", "SJ_BENCH_TOPIC_PREFIX": prefix}
    process = worker(PEER_APP, broker, workdir, name, env=env, web_port=port)
    with running(process):
        peer = watch(name, process, lambda: peer_processed(port), backlog.records, args.timeout)
    say(f"  {name}: {fmt_rate(peer.rate)} records/s")
    return peer


def print_throughput(report: ThroughputReport) -> None:
    rows = []
    runs = report.peer_runs or ([report.peer] if report.peer else [])
    for r in [*runs, report.streamjoin]:
        rows.append(
            [
                r.name,
                f"{r.records:,}",
                f"{r.timed:,}",
                f"{r.seconds:.2f}",
                fmt_rate(r.rate),
                f"{r.startup_s:.1f}",
            ]
        )
    headers = ["join throughput", "records", "timed", "seconds", "records/s", "start-up s"]
    say(render_table(headers, rows))
    say("(timed: records processed between the first poll that saw a processed record")
    say(" and the first that saw all of them; start-up and group join are not timed)")
    if report.join_stats:
        say(ads.stats_line(report.join_stats))
        late = int(report.join_stats.get("late", 0))
        if late:
            say(
                f"WARNING: the join sent {late:,} records to the dead-letter topic as late "
                "although no generated record is more than jitter (< grace) out of order; "
                "late records skip the attribution, so the rate above overstates a correct run"
            )
    if report.ratio is not None:
        say(
            f"streamjoin / peer (its faster pass): {report.ratio:.0%} "
            f"(target >= {THROUGHPUT_RATIO_TARGET:.0%}): "
            f"{verdict(report.ratio >= THROUGHPUT_RATIO_TARGET)}"
        )


def summary_rows(tp: ThroughputReport) -> list[list[str]]:
    """The summary's throughput rows: figure, value, target, verdict."""
    rows = []
    if tp.peer is not None:
        rows.append(
            ["peer (faust, count only) records/s, faster pass", fmt_rate(tp.peer.rate), "", ""]
        )
    rows.append(["streamjoin join records/s", fmt_rate(tp.streamjoin.rate), "", ""])
    if tp.ratio is not None:
        rows.append(
            [
                "streamjoin / peer",
                f"{tp.ratio:.0%}",
                f">= {THROUGHPUT_RATIO_TARGET:.0%}",
                verdict(tp.ratio >= THROUGHPUT_RATIO_TARGET),
            ]
        )
    late = int(tp.join_stats.get("late", 0))
    rows.append(["late records (throughput run)", f"{late:,}", "0", verdict(late == 0)])
    return rows
