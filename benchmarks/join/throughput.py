"""Join benchmark, part 1: throughput of streamjoin against a ceiling, faust and Quix Streams.

A backlog of the generator's impressions and their clicks is produced to fresh
topics; then, one after the other and each with its own consumer group (or app
id), these passes read all of it while their counts are polled (see
``__main__.py``), every one in a process of its own:

* the **ceiling**: a bare ``AIOKafkaConsumer`` that only counts what ``getmany``
  returns (``bare_consumer.py``);
* **faust**: a plain ``faust.App`` whose one agent counts records
  (``peer_app.py``), before and again after the others (the machine's load
  drifts): the faster of its two passes is the one streamjoin is compared with;
* **streamjoin at its defaults**: one worker of ``streamjoin.ads.app`` with the
  live per-campaign table on (it runs before the join alone: its table also reads
  the ``attributed`` outcome topic, which must hold only its own outcomes);
* **streamjoin, the join alone**: the same app with the live table off;
* **Quix Streams**: ``join_interval`` of impressions and clicks (``quix_app.py``;
  "not run: <reason>" when ``quixstreams`` is missing or the pass fails).

With ``--metrics-cost``, the join alone runs again while this process GETs its
``/metrics`` every second, then once more unscraped, ``--metrics-rounds`` times
(``metrics_cost.py``; issue 40: serving metrics costs the join nothing
measurable).

With ``--large-impressions``, a second, larger backlog is produced and the ceiling
and the join alone read it too; the join's rate on it over its rate on the main
backlog is reported (issue 38: within 15%).

Each pass's rate is also given as a share of the ceiling on the same backlog; for
every pass the worker process's peak resident set size (``VmHWM``) when it has
processed the backlog, and for streamjoin (and Quix) the records of the join's
changelog topics after the pass per input record.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import ads
from benchmarks.harness.kafka import RETAIN_ALL, Backlog, create_topics, produce_backlog
from benchmarks.harness.kafka import topic_records as read_topic_records
from benchmarks.harness.measure import Throughput, memory_at, process_peak_rss_bytes
from benchmarks.harness.report import fmt_rate, render_table, say, verdict
from benchmarks.harness.workers import BenchError, http_json, running, script, watch, worker
from benchmarks.join import metrics_cost
from benchmarks.join.metrics_cost import MetricsCost, MetricsScraper, ScrapeStats
from streamjoin.dev.broker import LOOPBACK, EmbeddedBroker, free_port

#: the count-only faust peer
PEER_APP = "benchmarks.join.peer_app:app"
#: the ceiling: a bare aiokafka consumer
BARE_CONSUMER = "benchmarks.join.bare_consumer"
#: the Quix Streams interval join
QUIX_APP = "benchmarks.join.quix_app"
#: streamjoin's records/s over the peer's (issue 14: at least the peer's)
THROUGHPUT_RATIO_TARGET = 1.00
#: the join's rate on the large backlog may differ from the main one's by this much (issue 38)
LARGE_RATIO_TOLERANCE = 0.15
#: issue 38's targets: the join alone on one worker (records/s); the app at its
#: defaults as a share of that; changelog records per input record (half the
#: 2.11 measured on the 1M-record backlog before the work)
JOIN_RATE_TARGET = 100_000.0
LIVE_SHARE_TARGET = 0.60
CHANGELOG_PER_INPUT_TARGET = 1.05
#: the backlog's generator jitter (its default); the throughput run's grace must cover it
BACKLOG_JITTER_MS = 2_000

CEILING = "ceiling (bare aiokafka consumer)"
PEER = "faust (count only)"
JOIN_LIVE = "streamjoin (defaults, live table on)"
JOIN_ALONE = "streamjoin (join alone)"
QUIX = "Quix Streams (join_interval)"
#: the join alone while /metrics is scraped, and unscraped again after it (--metrics-cost)
JOIN_SCRAPED = f"{JOIN_ALONE}, /metrics every {metrics_cost.SCRAPE_INTERVAL_S:g} s"
JOIN_AGAIN = f"{JOIN_ALONE}, again"
#: the backlog names
MAIN, LARGE = "main", "large"


@dataclass
class Pass:
    """One pass over a backlog: a row of the comparison table."""

    label: str
    backlog: str = MAIN
    run: Throughput | None = None
    #: why the pass has no figure (empty: it ran)
    not_run: str = ""
    #: the pass's process's peak resident set size when it had read the backlog
    rss_bytes: int | None = None
    #: records in the join's changelog topic(s) after the pass
    changelog_records: int | None = None
    ceiling: bool = False
    #: what the scrapes of the worker's /metrics saw (``None``: not scraped)
    scrapes: ScrapeStats | None = None
    #: one of the passes --metrics-cost compares (the join alone, scraped or not)
    metrics_cost: bool = False

    @property
    def rate(self) -> float:
        """Records/s (NaN when the pass did not run or was too short to time)."""
        return self.run.rate if self.run is not None else math.nan

    @property
    def records(self) -> int:
        """Input records of the pass (0 when it did not run)."""
        return self.run.records if self.run is not None else 0

    @property
    def changelog_per_input(self) -> float | None:
        """Changelog records per input record (``None``: not measured)."""
        if self.changelog_records is None or not self.records:
            return None
        return self.changelog_records / self.records


def share(rate: float, ceiling: float | None) -> float | None:
    """*rate* as a fraction of *ceiling* (``None`` when either is missing)."""
    if ceiling is None or math.isnan(ceiling) or ceiling <= 0 or math.isnan(rate):
        return None
    return rate / ceiling


def ceiling_rates(passes: Sequence[Pass]) -> dict[str, float]:
    """Backlog name -> the ceiling's rate on it (the ceiling passes that ran)."""
    return {p.backlog: p.rate for p in passes if p.ceiling and p.run is not None}


def fmt_share(fraction: float | None) -> str:
    """A share as a whole percent (``""``: none)."""
    return "" if fraction is None else f"{fraction:.0%}"


def fmt_mib(n: int | None) -> str:
    """Bytes as whole MiB (``""``: not measured)."""
    return "" if n is None else f"{n / 2**20:,.0f} MiB"


COMPARISON_HEADERS = [
    "pass",
    "records",
    "records/s",
    "share of ceiling",
    "RSS peak",
    "changelog/input",
]


def comparison_rows(passes: Sequence[Pass]) -> list[list[str]]:
    """The comparison table's rows (:data:`COMPARISON_HEADERS`), in the passes' order.

    Each share is of the ceiling on the pass's own backlog; a pass that did not run
    says so in its records/s cell.
    """
    ceilings = ceiling_rates(passes)
    rows = []
    for p in passes:
        label = p.label if p.backlog == MAIN else f"{p.label}, {p.backlog} backlog"
        if p.not_run:
            rows.append([label, "", "not run", "", "", ""])
            continue
        per_input = p.changelog_per_input
        rows.append(
            [
                label,
                f"{p.records:,}",
                fmt_rate(p.rate),
                fmt_share(share(p.rate, ceilings.get(p.backlog))),
                fmt_mib(p.rss_bytes),
                "" if per_input is None else f"{per_input:.3f}",
            ]
        )
    return rows


#: the points of a pass (shares of its backlog read) its resident memory is shown at
MEMORY_POINTS = (0.2, 0.4, 0.6, 0.8, 1.0)
#: the join's memory is bounded when it grows by at most this much over the last
#: 40% of the large backlog (2M records: a leak of 50 bytes a record would show)
MEMORY_GROWTH_MAX = 0.10
#: where that growth is measured from (a share of the backlog read)
MEMORY_SETTLED_AT = 0.6


def memory_line(p: Pass) -> str | None:
    """The resident memory of pass *p*'s worker as it read its backlog, at each of
    :data:`MEMORY_POINTS` (``None``: not watched)."""
    if p.run is None or not p.run.memory:
        return None
    points = []
    for point in MEMORY_POINTS:
        rss = memory_at(p.run.memory, math.ceil(p.run.records * point))
        if rss is not None:
            points.append(f"{point:.0%} {rss / 2**20:,.0f}")
    label = p.label if p.backlog == MAIN else f"{p.label}, {p.backlog} backlog"
    return f"{label}: resident memory (MiB) as the backlog is read: {', '.join(points)}"


def memory_growth(p: Pass | None) -> float | None:
    """How much pass *p*'s worker's resident memory grew from
    :data:`MEMORY_SETTLED_AT` of its backlog to the end (``None``: not watched)."""
    if p is None or p.run is None or not p.run.memory:
        return None
    settled = memory_at(p.run.memory, math.ceil(p.run.records * MEMORY_SETTLED_AT))
    end = p.run.memory[-1][1]
    if not settled:
        return None
    return end / settled - 1.0


def large_ratio(main: float, large: float) -> float | None:
    """The join's rate on the large backlog over its rate on the main one."""
    if math.isnan(main) or math.isnan(large) or main <= 0:
        return None
    return large / main


def large_ratio_ok(ratio: float | None) -> bool | None:
    """Is *ratio* within :data:`LARGE_RATIO_TOLERANCE` of 1 (``None``: not measured)?"""
    if ratio is None:
        return None
    return abs(ratio - 1.0) <= LARGE_RATIO_TOLERANCE


@dataclass
class ThroughputReport:
    backlog: Backlog
    peer: Throughput | None
    streamjoin: Throughput
    join_stats: dict[str, Any]
    #: every pass of the peer (before and after streamjoin); ``peer`` is the faster
    peer_runs: list[Throughput] = field(default_factory=list)
    #: every pass, in the order they ran (the comparison table)
    passes: list[Pass] = field(default_factory=list)
    large_backlog: Backlog | None = None
    #: the Quix pass's counts (``processed``, ``joined``) when it ran
    quix_counts: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """streamjoin / peer records/s."""
        if self.peer is None or math.isnan(self.peer.rate) or math.isnan(self.streamjoin.rate):
            return None
        return self.streamjoin.rate / self.peer.rate

    def find(self, label: str, backlog: str = MAIN) -> Pass | None:
        """The first pass *label* on *backlog*."""
        return next((p for p in self.passes if p.label == label and p.backlog == backlog), None)

    @property
    def metrics_cost(self) -> MetricsCost | None:
        """The join alone with and without scraping (``None``: not measured)."""
        return metrics_cost.metrics_cost(self.passes)

    @property
    def large_ratio(self) -> float | None:
        """The join alone's records/s on the large backlog over the main one's."""
        large = self.find(JOIN_ALONE, LARGE)
        if large is None or large.run is None:
            return None
        return large_ratio(self.streamjoin.rate, large.rate)


def peer_processed(port: int) -> int | None:
    """The count served at ``/bench/count/`` on *port* (the peer, the ceiling, Quix)."""
    doc = http_json(f"http://{LOOPBACK}:{port}/bench/count/")
    try:
        return int(doc["processed"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None


def _produce(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    prefix: str,
    impressions: int,
) -> Backlog:
    """A fresh backlog of *impressions* impressions and their clicks at *prefix*."""
    from streamjoin.ads import generator
    from streamjoin.ads.topics import AdTopics

    topics = AdTopics(prefix)
    backlog_config = generator.GeneratorConfig(
        seed=args.seed,
        impressions=impressions,
        jitter_ms=BACKLOG_JITTER_MS,
        malformed_rate=0.0,
        partitions=args.partitions,
        impressions_topic=topics.impressions,
        clicks_topic=topics.clicks,
    )
    # retention set explicitly: Quix derives its changelogs' configs from it
    asyncio.run(create_topics(broker.bootstrap, topics.inputs, args.partitions, RETAIN_ALL))
    say(f"producing the backlog at {prefix}: {impressions:,} impressions and their clicks ...")
    backlog = asyncio.run(produce_backlog(broker.bootstrap, backlog_config))
    say(
        f"  {backlog.records:,} records ({backlog.impressions:,} impressions, "
        f"{backlog.clicks:,} clicks) in {backlog.seconds:.1f}s "
        f"({backlog.records / backlog.seconds:,.0f}/s)"
    )
    ends = sum(backlog.ends.values())
    if ends != backlog.records:
        raise BenchError(f"the topics end at {ends:,} records, {backlog.records:,} were produced")
    return backlog


def run_throughput(
    args: argparse.Namespace, broker: EmbeddedBroker, workdir: Path, run_id: str
) -> ThroughputReport:
    prefix = f"{run_id}-tp-"
    backlog = _produce(args, broker, prefix, args.impressions)
    passes: list[Pass] = []

    if args.skip_ceiling:
        passes.append(Pass(CEILING, MAIN, not_run="skipped (--skip-ceiling)", ceiling=True))
    else:
        say("(a) ceiling: a bare aiokafka consumer reading both topics, no processing ...")
        passes.append(_run_ceiling(args, broker, workdir, run_id, prefix, backlog, MAIN))

    if not args.skip_peer:
        say("(b) faust: a plain faust.App counting both topics, one worker ...")
        passes.append(_run_peer(args, broker, workdir, run_id, prefix, backlog, "peer"))

    # before the join alone: the live table also reads the attributed-outcome topic,
    # which then holds only this pass's outcomes
    if args.skip_live:
        passes.append(Pass(JOIN_LIVE, MAIN, not_run="skipped (--skip-live)"))
    else:
        say(f"(c) streamjoin at its defaults (live table on; grace {args.grace_ms} ms) ...")
        live, _ = _run_streamjoin(
            args, broker, workdir, "streamjoin-live", f"{run_id}-sj-live", prefix, backlog,
            JOIN_LIVE, MAIN, live=True,
        )  # fmt: skip
        passes.append(live)

    say(f"(d) streamjoin, the join alone (live table off; grace {args.grace_ms} ms) ...")
    alone, join_stats = _run_streamjoin(
        args, broker, workdir, "streamjoin", f"{run_id}-sj", prefix, backlog,
        JOIN_ALONE, MAIN, live=False,
    )  # fmt: skip
    passes.append(alone)
    assert alone.run is not None
    if args.metrics_cost:
        passes += _run_metrics_cost(args, broker, workdir, run_id, prefix, backlog)
        alone.metrics_cost = True

    quix_counts: dict[str, Any] = {}
    if args.skip_quix:
        passes.append(Pass(QUIX, not_run="skipped (--skip-quix)"))
    else:
        say("(e) Quix Streams: join_interval of impressions and clicks, one process ...")
        quix, quix_counts = _run_quix(args, broker, workdir, run_id, prefix, backlog)
        passes.append(quix)

    if not args.skip_peer:
        # the machine's load changes during a run: the peer again, after the
        # others, and the faster of its two passes is the one compared
        say("(f) faust again (its own new group), after the others ...")
        again = _run_peer(args, broker, workdir, run_id, prefix, backlog, "peer-again")
        again.label = f"{PEER}, again"
        passes.append(again)
    peers = [p.run for p in passes if p.label.startswith(PEER) and p.run is not None]
    peer = max(peers, key=lambda r: 0.0 if math.isnan(r.rate) else r.rate, default=None)

    large_backlog = None
    if args.large_impressions:
        say(f"(g) the large backlog: {args.large_impressions:,} impressions ...")
        large_prefix = f"{run_id}-tpl-"
        large_backlog = _produce(args, broker, large_prefix, args.large_impressions)
        passes.append(
            _run_ceiling(args, broker, workdir, run_id, large_prefix, large_backlog, LARGE)
        )
        large, _ = _run_streamjoin(
            args, broker, workdir, "streamjoin-large", f"{run_id}-sj-large", large_prefix,
            large_backlog, JOIN_ALONE, LARGE, live=False,
        )  # fmt: skip
        passes.append(large)
    return ThroughputReport(
        backlog, peer, alone.run, join_stats, peers, passes, large_backlog, quix_counts
    )


def _run_metrics_cost(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    workdir: Path,
    run_id: str,
    prefix: str,
    backlog: Backlog,
) -> list[Pass]:
    """``--metrics-rounds`` rounds of the join alone scraped, then not (issue 40)."""
    passes = []
    rounds = args.metrics_rounds
    for n in range(1, rounds + 1):
        mark = f" ({n})" if rounds > 1 else ""
        for scrape, label, name in (
            (True, JOIN_SCRAPED, "scraped"),
            (False, JOIN_AGAIN, "again"),
        ):
            say(
                f"(d{n}) streamjoin, the join alone again"
                + (f", GET /metrics every {metrics_cost.SCRAPE_INTERVAL_S:g} s" if scrape else "")
                + " ..."
            )
            done, _ = _run_streamjoin(
                args, broker, workdir, f"streamjoin-{name}{n}", f"{run_id}-sj-{name}{n}",
                prefix, backlog, label + mark, MAIN, live=False, scrape=scrape,
            )  # fmt: skip
            done.metrics_cost = True
            passes.append(done)
    return passes


def _run_ceiling(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    workdir: Path,
    run_id: str,
    prefix: str,
    backlog: Backlog,
    which: str,
) -> Pass:
    """The bare consumer over the backlog at *prefix*, in a consumer group of its own."""
    from streamjoin.ads.topics import AdTopics

    name = f"ceiling-{which}"
    port = free_port()
    argv = [
        "--bootstrap", broker.bootstrap, "--group", f"{run_id}-{name}", "--port", str(port),
        "--expected", str(backlog.records), "--timeout", str(args.timeout),
        *AdTopics(prefix).inputs,
    ]  # fmt: skip
    process = script(BARE_CONSUMER, argv, workdir, name)
    with running(process):
        run = watch(name, process, lambda: peer_processed(port), backlog.records, args.timeout)
        rss = process_peak_rss_bytes(process.pid)
    say(f"  {name}: {fmt_rate(run.rate)} records/s")
    return Pass(CEILING, which, run, rss_bytes=rss, ceiling=True)


def _run_peer(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    workdir: Path,
    run_id: str,
    prefix: str,
    backlog: Backlog,
    name: str,
) -> Pass:
    """One pass of the faust peer over the backlog, in a consumer group of its own."""
    port = free_port()
    env = {"SJ_BENCH_APP_ID": f"{run_id}-{name}", "SJ_BENCH_TOPIC_PREFIX": prefix}
    process = worker(PEER_APP, broker, workdir, name, env=env, web_port=port)
    with running(process):
        peer = watch(name, process, lambda: peer_processed(port), backlog.records, args.timeout)
        rss = process_peak_rss_bytes(process.pid)
    say(f"  {name}: {fmt_rate(peer.rate)} records/s")
    return Pass(PEER, MAIN, peer, rss_bytes=rss)


def _run_streamjoin(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    workdir: Path,
    name: str,
    app_id: str,
    prefix: str,
    backlog: Backlog,
    label: str,
    which: str,
    *,
    live: bool,
    scrape: bool = False,
) -> tuple[Pass, dict[str, Any]]:
    """One worker *name* of the ad app (app id *app_id*) over the backlog at *prefix*;
    the pass and the join's counters. Its rate is the join's processed count. With
    *scrape*, this process GETs the worker's ``/metrics`` every second meanwhile."""
    config = ads.settings(app_id, prefix, args.partitions, args.grace_ms, live_table=live)
    port = free_port()
    process = ads.ads_worker(broker, workdir, name, config, port)
    scraper = MetricsScraper(metrics_cost.metrics_url(port)) if scrape else None
    with running(process):
        with scraper or contextlib.nullcontext():
            run = watch(
                name,
                process,
                lambda: ads.join_processed(port),
                backlog.records,
                args.timeout,
                memory_of=process.pid,
            )
        rss = process_peak_rss_bytes(process.pid)
        stats = ads.join_stats(port)
    # after the worker stopped: its last changelog writes are in
    changelog = asyncio.run(read_topic_records(broker.bootstrap, ads.changelog_topic(app_id)))
    scrapes = scraper.stats() if scraper is not None else None
    say(f"  {name}: {fmt_rate(run.rate)} records/s")
    if scrapes is not None:
        say(f"  {name}: {scrapes.line()}")
    done = Pass(label, which, run, rss_bytes=rss, changelog_records=changelog, scrapes=scrapes)
    return done, stats


def quix_missing() -> str | None:
    """Why the Quix pass cannot run here (``None``: ``quixstreams`` is importable)."""
    if importlib.util.find_spec("quixstreams") is None:
        return "quixstreams is not installed (pip install -e '.[bench]')"
    return None


def _run_quix(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    workdir: Path,
    run_id: str,
    prefix: str,
    backlog: Backlog,
) -> tuple[Pass, dict[str, Any]]:
    """The Quix Streams interval join over the backlog; a pass that failed says why
    (``not_run``) instead of failing the benchmark."""
    from streamjoin.ads.topics import AdTopics

    reason = quix_missing()
    if reason:
        say(f"  Quix Streams: not run: {reason}")
        return Pass(QUIX, not_run=reason), {}
    topics = AdTopics(prefix)
    group = f"{run_id}-quix"
    port = free_port()
    argv = [
        "--bootstrap", broker.bootstrap, "--group", group, "--port", str(port),
        "--impressions", topics.impressions, "--clicks", topics.clicks,
        "--output", f"{prefix}quix-joined", "--state-dir", str(workdir / "quix-state"),
        "--partitions", str(args.partitions), "--grace-ms", str(args.grace_ms),
        "--timeout", str(args.timeout),
    ]  # fmt: skip
    process = script(QUIX_APP, argv, workdir, "quix")
    try:
        with running(process):
            run = watch(
                "quix", process, lambda: peer_processed(port), backlog.records, args.timeout
            )
            rss = process_peak_rss_bytes(process.pid)
            counts = dict(http_json(f"http://{LOOPBACK}:{port}/bench/count/") or {})
    except BenchError as exc:
        say(f"  Quix Streams: not run: {exc}")
        return Pass(QUIX, not_run=str(exc)), {}
    # Quix's changelogs: changelog__<group>--<topic>--<store>, one per side of the join
    sides = [
        asyncio.run(read_topic_records(broker.bootstrap, f"changelog__{group}--{topic}--join"))
        for topic in topics.inputs
    ]
    changelog = None if None in sides else sum(n or 0 for n in sides)
    say(f"  quix: {fmt_rate(run.rate)} records/s; {counts.get('joined', 0):,} matches")
    return Pass(QUIX, MAIN, run, rss_bytes=rss, changelog_records=changelog), counts


def print_throughput(report: ThroughputReport) -> None:
    say(render_table(COMPARISON_HEADERS, comparison_rows(report.passes)))
    say("(records/s: records processed between the first poll that saw a processed record")
    say(" and the first that saw all of them; start-up and group join are not timed.")
    say(" share of ceiling: of the bare consumer on the same backlog. RSS peak: VmHWM of")
    say(" the pass's process. changelog/input: records in the join's changelog topic(s)")
    say(" after the pass per input record. streamjoin's rate is its join's processed count)")
    for p in report.passes:
        if p.not_run:
            say(f"{p.label}: not run: {p.not_run}")
    if report.quix_counts:
        say(f"Quix Streams: {int(report.quix_counts.get('joined', 0)):,} join matches emitted")
    if report.join_stats:
        say(ads.stats_line(report.join_stats))
        late = int(report.join_stats.get("late", 0))
        if late:
            say(
                f"WARNING: the join sent {late:,} records to the dead-letter topic as late "
                "although no generated record is more than jitter (< grace) out of order; "
                "late records skip the attribution, so the rate above overstates a correct run"
            )
    for p in report.passes:
        line = memory_line(p)
        if line:
            say(line)
    if report.ratio is not None:
        say(
            f"streamjoin / faust peer (its faster pass): {report.ratio:.0%} "
            f"(target >= {THROUGHPUT_RATIO_TARGET:.0%}): "
            f"{verdict(report.ratio >= THROUGHPUT_RATIO_TARGET)}"
        )
    cost = report.metrics_cost
    if cost is not None:
        metrics_cost.print_metrics_cost(cost)
    ratio = report.large_ratio
    if ratio is not None:
        say(
            f"streamjoin (join alone), large / main backlog records/s: {ratio:.0%} "
            f"(target within {LARGE_RATIO_TOLERANCE:.0%}): {verdict(large_ratio_ok(ratio))}"
        )
    growth = memory_growth(report.find(JOIN_ALONE, LARGE))
    if growth is not None:
        say(
            f"streamjoin (join alone), large backlog: resident memory from "
            f"{MEMORY_SETTLED_AT:.0%} of it to the end {growth:+.1%} "
            f"(bounded: at most {MEMORY_GROWTH_MAX:+.0%}): {verdict(growth <= MEMORY_GROWTH_MAX)}"
        )


def summary_rows(tp: ThroughputReport) -> list[list[str]]:
    """The summary's throughput rows: figure, value, target, verdict."""
    rows = []
    ceilings = ceiling_rates(tp.passes)
    for p in tp.passes:
        if p.label == PEER or p.label.startswith(f"{PEER},"):
            continue  # the faster of the peer's passes, below
        if p.metrics_cost and p.label != JOIN_ALONE:
            continue  # compared with the join alone, below
        label = p.label if p.backlog == MAIN else f"{p.label}, {p.backlog} backlog"
        if p.not_run:
            rows.append([f"{label} records/s", "not run", "", ""])
            continue
        rows.append([f"{label} records/s", fmt_rate(p.rate), "", ""])
        if not p.ceiling:
            rows.append(
                [f"{label} / ceiling", fmt_share(share(p.rate, ceilings.get(p.backlog))), "", ""]
            )
    if tp.peer is not None:
        rows.append(
            ["peer (faust, count only) records/s, faster pass", fmt_rate(tp.peer.rate), "", ""]
        )
    if not tp.passes:
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
    alone = next((p for p in tp.passes if p.label == JOIN_ALONE and p.backlog == MAIN), None)
    live = next((p for p in tp.passes if p.label == JOIN_LIVE and p.backlog == MAIN), None)
    if alone is not None and not alone.not_run and not math.isnan(alone.rate):
        rows.append(
            [
                f"{JOIN_ALONE} records/s (issue 38)",
                fmt_rate(alone.rate),
                f">= {JOIN_RATE_TARGET:,.0f}",
                verdict(alone.rate >= JOIN_RATE_TARGET),
            ]
        )
        per_input = alone.changelog_per_input
        if per_input is not None:
            rows.append(
                [
                    "changelog records per input record (join alone)",
                    f"{per_input:.3f}",
                    f"<= {CHANGELOG_PER_INPUT_TARGET:.2f}",
                    verdict(per_input <= CHANGELOG_PER_INPUT_TARGET),
                ]
            )
        if live is not None and not live.not_run and not math.isnan(live.rate):
            live_share = live.rate / alone.rate
            rows.append(
                [
                    f"{JOIN_LIVE} / join alone",
                    f"{live_share:.0%}",
                    f">= {LIVE_SHARE_TARGET:.0%}",
                    verdict(live_share >= LIVE_SHARE_TARGET),
                ]
            )
    ratio = tp.large_ratio
    if ratio is not None:
        rows.append(
            [
                "streamjoin (join alone) large / main backlog",
                f"{ratio:.0%}",
                f"within {LARGE_RATIO_TOLERANCE:.0%}",
                verdict(large_ratio_ok(ratio)),
            ]
        )
    growth = memory_growth(tp.find(JOIN_ALONE, LARGE))
    if growth is not None:
        rows.append(
            [
                f"streamjoin (join alone) memory growth, last "
                f"{1 - MEMORY_SETTLED_AT:.0%} of the large backlog",
                f"{growth:+.1%}",
                f"<= {MEMORY_GROWTH_MAX:+.0%}",
                verdict(growth <= MEMORY_GROWTH_MAX),
            ]
        )
    rows += metrics_cost.summary_rows(tp.metrics_cost)
    late = int(tp.join_stats.get("late", 0))
    rows.append(["late records (throughput run)", f"{late:,}", "0", verdict(late == 0)])
    return rows
