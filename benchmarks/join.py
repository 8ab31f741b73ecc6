"""Join benchmark: throughput against a read-only faust peer, end-to-end latency, state size.

One run, one embedded broker, three parts (each can be skipped or sized down):

1. **Throughput.** A backlog of ``--impressions`` impressions and their clicks
   (the example's seeded generator, no malformed records) is produced to fresh
   topics as fast as possible. Then, one after the other and each with its own
   consumer group, two single-worker runs read the whole backlog:

   * *peer*: a plain ``faust.App`` (faust-streaming's defaults) whose one agent
     over both topics only counts records (``join_peer_app.py``): the ceiling
     of reading the input through faust;
   * *streamjoin*: one worker of ``streamjoin.ads.app``.

   Both are watched the same way: their count (``GET /bench/count/`` and the
   join's ``stats.processed`` on ``GET /streamjoin/joins/``) is polled every
   0.1 s; the rate is the records counted between the first poll that sees a
   processed record and the first poll that sees all of them, over the time
   between the two, so worker start-up and the group join are not timed.

2. **End-to-end latency.** A fresh streamjoin worker with a small grace gets
   the generator's events paced in real time (event time = wall clock) at
   half the measured streamjoin throughput (or ``--latency-rate``); the
   three outcome topics are consumed in this process. A click's latency is
   the time its outcome was received (and, second figure, the outcome
   record's Kafka timestamp, set by the join's producer at send time) minus
   the wall time the click was produced. An outcome is final only once
   stream time passes ``click.ts + grace``, so latency is about the grace.

3. **State size.** In this process, ``--state-events`` generator events go
   through ``AdAttribution(...).task(BatchState over RocksDB)`` with a window
   so long that nothing expires, committed every ``--state-commit-every``
   events as the operator does; the database is flushed and closed and its
   directory's bytes are divided by the events buffered.

    python benchmarks/join.py [--impressions 200000] [--latency-seconds 30]
                              [--state-events 1000000] [--skip-throughput]
                              [--skip-latency] [--skip-state]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamjoin.ads.keys import FAMILY_NAMES
from streamjoin.ads.topics import AdTopics
from streamjoin.dev.broker import LOOPBACK, BrokerOptions, EmbeddedBroker, free_port
from streamjoin.dev.process import WorkerProcess

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: every target the summary checks
THROUGHPUT_RATIO_TARGET = 0.70
LATENCY_MARGIN_MS = 1_000  # p99 <= grace + this

OUTCOMES = AdTopics().outcomes
JOIN_NAME = "billing"
#: the key faust's RocksDB store keeps a partition's changelog offset under
OFFSET_KEY = b"__faust\0offset__"
#: an attribution window longer than any event time since 1970: nothing expires
NEVER_EXPIRES_MS = 100 * 365 * 24 * 3600 * 1000
#: key families of the join state (streamjoin.ads.keys) and the store's own key
FAMILIES = FAMILY_NAMES

#: the backlog's generator jitter (its default); the throughput run's grace must cover it
BACKLOG_JITTER_MS = 2_000
POLL_INTERVAL_S = 0.1
STOP_TIMEOUT_S = 10.0
PROGRESS_EVERY_S = 3.0


class BenchError(Exception):
    """A run that cannot give a figure (a worker died, a wait timed out)."""


def say(line: str = "") -> None:
    """Print a line now (progress must show while the run goes on)."""
    print(line, flush=True)


# ---------------------------------------------------------------------------
# Pure parts (unit-tested)
# ---------------------------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """The nearest-rank ``pct`` percentile of *values* (``0 < pct <= 100``).

    The smallest value such that at least ``pct`` percent of the values are
    less than or equal to it; always one of the values.

    Raises:
        ValueError: *values* is empty or *pct* is outside ``(0, 100]``.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not (isinstance(pct, int | float) and 0 < pct <= 100):
        raise ValueError(f"percentile must be in (0, 100], got {pct!r}")
    ordered = sorted(values)
    rank = math.ceil(pct / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


@dataclass(frozen=True)
class LatencySummary:
    """Percentiles of a set of latencies, in milliseconds."""

    count: int
    p50: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> LatencySummary:
        """Summarise *values_ms* (at least one value)."""
        return cls(
            count=len(values_ms),
            p50=percentile(values_ms, 50),
            p95=percentile(values_ms, 95),
            p99=percentile(values_ms, 99),
            max=max(values_ms),
        )


@dataclass(frozen=True)
class Sample:
    """A polled count and the (monotonic) time it was observed."""

    at: float
    count: int


@dataclass(frozen=True)
class Throughput:
    """One worker's pass over the backlog, timed from its first processed record.

    ``first`` is the first poll that saw a processed record, ``last`` the first
    that saw them all; records counted before ``first`` are not timed.
    """

    name: str
    records: int
    first: Sample
    last: Sample
    startup_s: float = 0.0

    @property
    def seconds(self) -> float:
        """Seconds between the two polls."""
        return self.last.at - self.first.at

    @property
    def timed(self) -> int:
        """Records processed between the two polls."""
        return self.last.count - self.first.count

    @property
    def rate(self) -> float:
        """Records per second (NaN when the pass was too short to time)."""
        if self.seconds <= 0 or self.timed <= 0:
            return math.nan
        return self.timed / self.seconds


def render_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned.

    Raises:
        ValueError: a row does not have one cell per header.
    """
    body = [list(row) for row in rows]
    for row in body:
        if len(row) != len(headers):
            raise ValueError(f"row {row!r} has {len(row)} cells for {len(headers)} headers")
    widths = [len(h) for h in headers]
    for row in body:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in body)])


def verdict(ok: bool | None) -> str:
    """``met`` / ``NOT met`` / ``-`` (no target or not measured)."""
    if ok is None:
        return "-"
    return "met" if ok else "NOT met"


def fmt_rate(rate: float) -> str:
    """Records per second with thousands separators (``n/a`` for NaN)."""
    return "n/a" if math.isnan(rate) else f"{rate:,.0f}"


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


def dir_bytes(path: Path) -> dict[str, int]:
    """Bytes of the files below *path*: ``sst``, ``wal`` (``*.log``), ``other`` and ``total``."""
    sizes = {"sst": 0, "wal": 0, "other": 0}
    for file in sorted(path.rglob("*")):
        if not file.is_file():
            continue
        size = file.stat().st_size
        if file.suffix == ".sst":
            sizes["sst"] += size
        elif file.suffix == ".log":
            sizes["wal"] += size
        else:
            sizes["other"] += size
    sizes["total"] = sum(sizes.values())
    return sizes


def mib(n: float) -> str:
    """Bytes as MiB with two decimals."""
    return f"{n / 2**20:,.2f} MiB"


def build_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(
        prog="python benchmarks/join.py",
        description=(__doc__ or "").splitlines()[0],
        allow_abbrev=False,
    )
    add = p.add_argument
    add("--seed", type=int, default=1, help="generator seed [%(default)s]")
    add("--partitions", type=int, default=4, help="partitions of the input topics [%(default)s]")
    t = p.add_argument_group("throughput")
    t.add_argument("--impressions", type=int, default=200_000, help="backlog size [%(default)s]")
    t.add_argument("--grace-ms", type=int, default=10_000, help="the join's grace [%(default)s]")
    t.add_argument(
        "--timeout", type=float, default=900.0, help="per worker run, seconds [%(default)s]"
    )
    t.add_argument("--skip-throughput", action="store_true", help="skip part 1")
    t.add_argument("--skip-peer", action="store_true", help="part 1 without the faust peer")
    lat = p.add_argument_group("latency")
    lat.add_argument(
        "--latency-seconds", type=float, default=30.0, help="measured seconds [%(default)s]"
    )
    lat.add_argument(
        "--latency-rate",
        type=float,
        help="records/s cap (default: half the measured streamjoin throughput)",
    )
    lat.add_argument(
        "--latency-grace-ms", type=int, default=2_000, help="the join's grace [%(default)s]"
    )
    lat.add_argument(
        "--latency-jitter-ms",
        type=int,
        default=1_000,
        help="generator jitter, at most the grace [%(default)s]",
    )
    lat.add_argument("--skip-latency", action="store_true", help="skip part 2")
    st = p.add_argument_group("state size")
    st.add_argument(
        "--state-events", type=int, default=1_000_000, help="events buffered [%(default)s]"
    )
    st.add_argument(
        "--state-commit-every", type=int, default=2_000, help="events per commit [%(default)s]"
    )
    st.add_argument("--skip-state", action="store_true", help="skip part 3")
    add(
        "--keep",
        action="store_true",
        help="keep the working directory (worker logs, data) after a successful run",
    )
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and check the command line; a bad value exits 2 with one clear line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    problems = argument_problems(args)
    if problems:
        parser.error("; ".join(problems))
    return args


def argument_problems(args: argparse.Namespace) -> list[str]:
    """Every reason *args* cannot run, as ``--flag: why`` lines (empty: fine)."""
    problems = []

    def need(ok: bool, flag: str, why: str, value: object) -> None:
        if not ok:
            problems.append(f"{flag}: {why}, got {value!r}")

    def finite_positive(x: float) -> bool:
        return math.isfinite(x) and x > 0

    need(args.seed >= 0, "--seed", "must be >= 0", args.seed)
    need(args.partitions >= 1, "--partitions", "must be >= 1", args.partitions)
    need(args.impressions >= 1_000, "--impressions", "must be >= 1000", args.impressions)
    need(
        args.grace_ms >= BACKLOG_JITTER_MS,
        "--grace-ms",
        f"must be >= the backlog's generator jitter ({BACKLOG_JITTER_MS} ms) so no record is late",
        args.grace_ms,
    )
    need(finite_positive(args.timeout), "--timeout", "must be a positive number", args.timeout)
    need(
        finite_positive(args.latency_seconds),
        "--latency-seconds",
        "must be a positive number",
        args.latency_seconds,
    )
    if args.latency_rate is not None:
        need(
            finite_positive(args.latency_rate),
            "--latency-rate",
            "must be a positive number of records/s",
            args.latency_rate,
        )
    need(args.latency_grace_ms >= 0, "--latency-grace-ms", "must be >= 0", args.latency_grace_ms)
    need(
        0 <= args.latency_jitter_ms <= max(args.latency_grace_ms, 0),
        "--latency-jitter-ms",
        f"must be in [0, --latency-grace-ms ({args.latency_grace_ms})] so no record is late",
        args.latency_jitter_ms,
    )
    need(args.state_events >= 1, "--state-events", "must be >= 1", args.state_events)
    need(
        args.state_commit_every >= 1,
        "--state-commit-every",
        "must be >= 1",
        args.state_commit_every,
    )
    if args.skip_throughput and args.skip_latency and args.skip_state:
        problems.append("--skip-throughput --skip-latency --skip-state: nothing left to run")
    if args.skip_throughput and not args.skip_latency and args.latency_rate is None:
        problems.append(
            "--latency-rate: required with --skip-throughput (the latency run's rate is "
            "half the measured streamjoin throughput)"
        )
    return problems


# ---------------------------------------------------------------------------
# Kafka helpers
# ---------------------------------------------------------------------------


def _generator() -> Any:
    """The example's generator module (the repository root is not installed)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from streamjoin.ads import generator

    return generator


async def create_topics(bootstrap: str, names: Sequence[str], partitions: int) -> None:
    """Create *names* with *partitions* partitions each (replication 1)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [NewTopic(n, partitions, 1) for n in names if n not in existing]
        if missing:
            await admin.create_topics(missing)
    finally:
        await admin.close()


@dataclass
class Backlog:
    """What was produced for the throughput runs."""

    records: int = 0
    impressions: int = 0
    clicks: int = 0
    seconds: float = 0.0
    ends: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def records_per_impression(self) -> float:
        """Records produced per impression (clicks included)."""
        return self.records / self.impressions if self.impressions else math.nan


async def produce_backlog(bootstrap: str, config: Any) -> Backlog:
    """Produce every event of *config* as fast as the broker takes them."""
    from aiokafka import AIOKafkaProducer

    gen = _generator()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=20, max_batch_size=512 * 1024
    )
    await producer.start()
    backlog = Backlog()
    started = last_print = time.monotonic()
    window: list[asyncio.Future[Any]] = []

    async def settle() -> None:
        for meta in await asyncio.gather(*window):
            key = (meta.topic, meta.partition)
            backlog.ends[key] = max(backlog.ends.get(key, 0), meta.offset + 1)
        window.clear()

    try:
        for event in gen.generate(config):
            window.append(
                await producer.send(
                    event.topic, event.value, key=event.key, timestamp_ms=event.timestamp_ms
                )
            )
            backlog.records += 1
            if event.topic == config.impressions_topic:
                backlog.impressions += 1
            else:
                backlog.clicks += 1
            if len(window) >= 20_000:
                await settle()
                now = time.monotonic()
                if now - last_print >= PROGRESS_EVERY_S:
                    last_print = now
                    rate = backlog.records / (now - started)
                    say(f"  {backlog.records:,} records produced ({rate:,.0f}/s)")
        await settle()
    finally:
        await producer.stop()
    backlog.seconds = time.monotonic() - started
    return backlog


# ---------------------------------------------------------------------------
# Workers
# ---------------------------------------------------------------------------

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, no proxy


def http_json(url: str, timeout: float = 2.0) -> Any | None:
    """GET *url* and decode its JSON; ``None`` when the worker does not answer (yet)."""
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def web_args(port: int) -> list[str]:
    """Worker options: web server on *port*, bound to and advertised on loopback."""
    return ["--with-web", "--web-port", str(port), "--web-bind", LOOPBACK, "--web-host", LOOPBACK]


def streamjoin_worker(
    broker: EmbeddedBroker,
    workdir: Path,
    name: str,
    app_id: str,
    prefix: str,
    partitions: int,
    grace_ms: int,
    port: int,
) -> WorkerProcess:
    """One worker of the ad-monetization app (not started)."""
    return WorkerProcess(
        "streamjoin.ads.app:app",
        broker.url,
        workdir / f"data-{name}",
        workdir / f"{name}.log",
        env={
            "ADS_APP_ID": app_id,
            "ADS_TOPIC_PREFIX": prefix,
            "ADS_PARTITIONS": str(partitions),
            "ADS_GRACE_MS": str(grace_ms),
            # the join alone: the example's live campaign table is two more
            # agents that repartition every impression
            "ADS_LIVE_TABLE": "0",
        },
        extra_args=web_args(port),
        cwd=ROOT,
    )


def streamjoin_processed(port: int) -> int | None:
    """The join's ``stats.processed`` on the worker at *port*."""
    doc = http_json(f"http://{LOOPBACK}:{port}/streamjoin/joins/")
    try:
        return int(doc[JOIN_NAME]["stats"]["processed"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None


def peer_processed(port: int) -> int | None:
    """The peer's count on the worker at *port*."""
    doc = http_json(f"http://{LOOPBACK}:{port}/bench/count/")
    try:
        return int(doc["processed"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None


def watch(
    name: str,
    worker: WorkerProcess,
    count: Callable[[], int | None],
    expected: int,
    timeout: float,
) -> Throughput:
    """Poll *count* until it reaches *expected*; time the pass from its first record."""
    started = time.monotonic()
    deadline = started + timeout
    last_print = started
    first: Sample | None = None
    while True:
        if not worker.running():
            raise BenchError(
                f"{name} worker exited (status {worker.returncode()}) before processing "
                f"{expected:,} records; its log: {worker.log_path}"
            )
        before = time.monotonic()
        seen = count()
        after = time.monotonic()
        at = (before + after) / 2  # the worker answered somewhere in between
        if seen is not None and seen > 0:
            if first is None:
                first = Sample(at, seen)
                say(f"  {name}: first records processed {at - started:.1f}s after start")
            if seen >= expected:
                return Throughput(name, expected, first, Sample(at, seen), first.at - started)
        if after - last_print >= PROGRESS_EVERY_S:
            last_print = after
            if first is None:
                say(f"  {name}: starting ({after - started:.0f}s)")
            else:
                done = (seen or first.count) - first.count
                rate = done / max(after - first.at, 1e-9)
                say(f"  {name}: {seen or 0:,}/{expected:,} records ({rate:,.0f}/s)")
        if after >= deadline:
            raise BenchError(
                f"{name}: {seen or 0:,} of {expected:,} records processed after "
                f"{timeout:.0f}s; its log: {worker.log_path}"
            )
        time.sleep(POLL_INTERVAL_S)


# ---------------------------------------------------------------------------
# Part 1: throughput
# ---------------------------------------------------------------------------


@dataclass
class ThroughputReport:
    backlog: Backlog
    peer: Throughput | None
    streamjoin: Throughput
    join_stats: dict[str, Any]

    @property
    def ratio(self) -> float | None:
        """streamjoin / peer records/s."""
        if self.peer is None or math.isnan(self.peer.rate) or math.isnan(self.streamjoin.rate):
            return None
        return self.streamjoin.rate / self.peer.rate


def run_throughput(
    args: argparse.Namespace, broker: EmbeddedBroker, workdir: Path, run_id: str
) -> ThroughputReport:
    gen = _generator()
    prefix = f"{run_id}-tp-"
    config = gen.GeneratorConfig(
        seed=args.seed,
        impressions=args.impressions,
        jitter_ms=BACKLOG_JITTER_MS,
        malformed_rate=0.0,
        partitions=args.partitions,
        impressions_topic=prefix + gen.IMPRESSIONS,
        clicks_topic=prefix + gen.CLICKS,
    )
    topics = [config.impressions_topic, config.clicks_topic]
    asyncio.run(create_topics(broker.bootstrap, topics, args.partitions))
    say(f"producing the backlog: {args.impressions:,} impressions and their clicks ...")
    backlog = asyncio.run(produce_backlog(broker.bootstrap, config))
    say(
        f"  {backlog.records:,} records ({backlog.impressions:,} impressions, "
        f"{backlog.clicks:,} clicks) in {backlog.seconds:.1f}s "
        f"({backlog.records / backlog.seconds:,.0f}/s)"
    )
    ends = sum(backlog.ends.values())
    if ends != backlog.records:
        raise BenchError(f"the topics end at {ends:,} records, {backlog.records:,} were produced")

    peer = None
    if not args.skip_peer:
        say("(a) faust peer: a plain faust.App counting both topics, one worker ...")
        port = free_port()
        worker = WorkerProcess(
            "join_peer_app:app",
            broker.url,
            workdir / "data-peer",
            workdir / "peer.log",
            env={"SJ_BENCH_APP_ID": f"{run_id}-peer", "SJ_BENCH_TOPIC_PREFIX": prefix},
            extra_args=web_args(port),
            cwd=HERE,
        )
        worker.start()
        try:
            peer = watch(
                "peer", worker, lambda: peer_processed(port), backlog.records, args.timeout
            )
        finally:
            worker.stop(timeout=STOP_TIMEOUT_S)
        say(f"  peer: {fmt_rate(peer.rate)} records/s")

    say(
        f"(b) streamjoin: one worker of streamjoin.ads.app (grace {args.grace_ms} ms) ..."
    )
    port = free_port()
    worker = streamjoin_worker(
        broker, workdir, "streamjoin", f"{run_id}-sj", prefix, args.partitions, args.grace_ms, port
    )
    worker.start()
    try:
        ours = watch(
            "streamjoin", worker, lambda: streamjoin_processed(port), backlog.records, args.timeout
        )
        doc = http_json(f"http://{LOOPBACK}:{port}/streamjoin/joins/") or {}
        join_stats = dict(doc.get(JOIN_NAME, {}).get("stats", {}))
    finally:
        worker.stop(timeout=STOP_TIMEOUT_S)
    say(f"  streamjoin: {fmt_rate(ours.rate)} records/s")
    return ThroughputReport(backlog, peer, ours, join_stats)


def _stats_line(stats: dict[str, Any]) -> str:
    """The join's counters in one line."""
    emitted = ", ".join(f"{k} {v:,}" for k, v in sorted(stats.get("emitted", {}).items()))
    batches = int(stats.get("batches", 0))
    processed = int(stats.get("processed", 0))
    per_batch = processed / batches if batches else math.nan
    return (
        f"streamjoin: {processed:,} processed in {batches:,} batches ({per_batch:,.1f} per "
        f"batch), {stats.get('bad', 0)} bad, {stats.get('late', 0):,} late, "
        f"{stats.get('idle_expirations', 0):,} idle waits expired; emitted {emitted or 'nothing'}"
    )


def print_throughput(report: ThroughputReport) -> None:
    rows = []
    for r in (report.peer, report.streamjoin):
        if r is None:
            continue
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
        say(_stats_line(report.join_stats))
        late = int(report.join_stats.get("late", 0))
        if late:
            say(
                f"WARNING: the join sent {late:,} records to the dead-letter topic as late "
                "although no generated record is more than jitter (< grace) out of order; "
                "late records skip the attribution, so the rate above overstates a correct run"
            )
    if report.ratio is not None:
        say(
            f"streamjoin / peer: {report.ratio:.0%} "
            f"(target >= {THROUGHPUT_RATIO_TARGET:.0%}): "
            f"{verdict(report.ratio >= THROUGHPUT_RATIO_TARGET)}"
        )


# ---------------------------------------------------------------------------
# Part 2: latency
# ---------------------------------------------------------------------------


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
    #: sampled every second: wall clock minus the join's smallest task stream time
    stream_lag_ms: list[float] = field(default_factory=list)
    #: sampled every second: records the join holds (merger buffers)
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


def records_per_impression(seed: int) -> float:
    """Records per impression of the generator's defaults (a 20,000-impression sample)."""
    gen = _generator()
    config = gen.GeneratorConfig(seed=seed, impressions=20_000, malformed_rate=0.0, tail=False)
    return sum(1 for _ in gen.generate(config)) / 20_000


def _join_sample(port: int) -> tuple[float | None, int | None, dict[str, Any]]:
    """(wall ms - smallest task stream time, records buffered, stats) of the join at *port*."""
    doc = http_json(f"http://{LOOPBACK}:{port}/streamjoin/joins/")
    now_ms = time.time() * 1000
    try:
        join = doc[JOIN_NAME]  # type: ignore[index]
        times = [t["stream_time"] for t in join["tasks"].values() if t["stream_time"]]
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

    gen = _generator()
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
    in_flight: collections.deque[asyncio.Future[Any]] = collections.deque()
    sent = traffic.sent
    try:
        started = last_print = time.monotonic()
        for event in gen.generate(config):
            delay = event.arrival_ms / 1000 - time.time()  # event time is wall clock
            if delay > 0.002:
                await asyncio.sleep(delay)
            else:
                traffic.behind_ms = max(traffic.behind_ms, -delay * 1000)
            if event.topic == config.clicks_topic and event.timestamp_ms <= measured_until_ms:
                sent[json.loads(event.value)["click_id"]] = time.time()
            in_flight.append(
                await producer.send(
                    event.topic, event.value, key=event.key, timestamp_ms=event.timestamp_ms
                )
            )
            traffic.records += 1
            while in_flight and in_flight[0].done():
                in_flight.popleft().result()  # raises a failed send
            now = time.monotonic()
            if now - last_print >= PROGRESS_EVERY_S:
                last_print = now
                done = sum(1 for c in sent if c in traffic.received)
                lag = traffic.stream_lag_ms[-1] if traffic.stream_lag_ms else math.nan
                say(
                    f"  {now - started:.0f}s: {traffic.records:,} records sent, "
                    f"{done:,}/{len(sent):,} clicks have their outcome, "
                    f"join stream time {lag:,.0f} ms behind the wall clock"
                )
        await asyncio.gather(*in_flight)
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
    gen = _generator()
    prefix = f"{run_id}-lat-"
    grace, jitter = args.latency_grace_ms, args.latency_jitter_ms
    impression_rate = record_rate / per_impression
    say(
        f"latency: {record_rate:,.0f} records/s ({impression_rate:,.0f} impressions/s) for "
        f"{args.latency_seconds:g}s, grace {grace} ms, jitter {jitter} ms ..."
    )
    topics = [prefix + gen.IMPRESSIONS, prefix + gen.CLICKS]
    outcome_topics = [prefix + t for t in OUTCOMES]
    asyncio.run(create_topics(broker.bootstrap, topics + outcome_topics, args.partitions))
    port = free_port()
    worker = streamjoin_worker(
        broker, workdir, "latency", f"{run_id}-lat", prefix, args.partitions, grace, port
    )
    worker.start()
    try:
        try:
            worker.wait_for_log(r"tables restored:", args.timeout)
            worker.wait_for_log(r"\[\^Worker\]: Ready", args.timeout)
        except TimeoutError as exc:
            raise BenchError(
                f"latency worker not ready: {exc}; its log: {worker.log_path}"
            ) from exc
        time.sleep(1.0)  # let the agents take their first fetch
        # decisions need stream time past click.ts + grace: run on long enough
        # after the measured span that the last measured clicks are decided
        extra_ms = grace + jitter + 2_000
        start_ms = int(time.time() * 1000) + 200
        measured_ms = round(args.latency_seconds * 1000)
        config = gen.GeneratorConfig(
            seed=args.seed,
            duration_ms=measured_ms + extra_ms,
            rate=impression_rate,
            jitter_ms=jitter,
            malformed_rate=0.0,
            start_ts_ms=start_ms,
            tail=False,
            partitions=args.partitions,
            impressions_topic=topics[0],
            clicks_topic=topics[1],
        )
        traffic = asyncio.run(
            _latency_traffic(
                broker.bootstrap,
                config,
                start_ms + measured_ms,
                outcome_topics,
                args.partitions,
                port,
                wait_s=30.0,
            )
        )
    finally:
        worker.stop(timeout=STOP_TIMEOUT_S)
    return LatencyReport(
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
            f"join stream time behind the wall clock (sampled each second): median "
            f"{percentile(t.stream_lag_ms, 50):,.0f} ms, max {max(t.stream_lag_ms):,.0f} ms; "
            f"records held in the join: median {percentile(t.buffered, 50):,.0f}, "
            f"max {max(t.buffered):,}"
        )
    if t.join_stats:
        say(_stats_line(t.join_stats))
    low = report.grace_ms - report.jitter_ms
    say(
        f"an outcome is final only once stream time passes click.ts + grace ({report.grace_ms} "
        f"ms), so latencies of about the grace (from grace - jitter = {low} ms up) are expected"
    )
    if report.received is not None:
        say(
            f"p99 {report.received.p99:,.0f} ms (target <= grace + 1 s = {report.target_ms:,} ms): "
            f"{verdict(report.ok)}"
        )


# ---------------------------------------------------------------------------
# Part 3: state size
# ---------------------------------------------------------------------------


@dataclass
class StateReport:
    events: int
    impressions: int
    clicks: int
    seconds: float
    flushed: dict[str, int]
    compacted: dict[str, int]
    keys: dict[str, int]
    logical_bytes: int

    def per_event(self, sizes: dict[str, int]) -> float:
        return sizes["total"] / self.events

    def mib_per_million(self, sizes: dict[str, int]) -> float:
        return self.per_event(sizes) * 1_000_000 / 2**20


def _events(seed: int, count: int) -> Iterator[Any]:
    gen = _generator()
    config = gen.GeneratorConfig(
        seed=seed, impressions=count, malformed_rate=0.0, tail=False, partitions=1
    )
    return itertools.islice(gen.generate(config), count)


def run_state(args: argparse.Namespace, workdir: Path) -> StateReport:
    import rocksdict

    from streamjoin.ads.policy import AdAttribution
    from streamjoin.faust.batch_state import BatchState
    from streamjoin.join import keys
    from streamjoin.join.window import JoinWindow

    gen = _generator()
    total = args.state_events
    say(f"state: {total:,} events through AdAttribution over RocksDB (nothing expires) ...")
    path = workdir / "state-db"
    policy = AdAttribution(JoinWindow(before=0, after=NEVER_EXPIRES_MS, grace=10_000))
    db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))
    state = BatchState()
    state.db = db
    task = policy.task(state)
    positions = {"left": 0, "right": 0}
    imps = clicks = 0

    def commit(n: int) -> None:
        task.checkpoint()
        for side, offset in positions.items():
            state.put(keys.position_key(side), offset.to_bytes(8, "big"))
        state.commit(OFFSET_KEY, n)

    started = last_print = time.monotonic()
    n = 0
    for n, event in enumerate(_events(args.seed, total), 1):
        if event.topic == gen.IMPRESSIONS:
            imps += 1
            positions["left"] += 1
            task.on_left(policy.decode_left(event.key, event.value, event.timestamp_ms))
        else:
            clicks += 1
            positions["right"] += 1
            task.on_right(policy.decode_right(event.key, event.value, event.timestamp_ms))
        if n % args.state_commit_every == 0:
            commit(n)
            now = time.monotonic()
            if now - last_print >= PROGRESS_EVERY_S:
                last_print = now
                say(f"  {n:,}/{total:,} events fed ({n / (now - started):,.0f}/s)")
    commit(n)
    seconds = time.monotonic() - started
    db.flush()
    db.close()
    flushed = dir_bytes(path)

    db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))
    counts: dict[str, int] = collections.Counter()
    logical = 0
    for key, value in db.items():
        counts[FAMILIES.get(key[0], "store offset" if key == OFFSET_KEY else "other")] += 1
        logical += len(key) + len(value)
    db.compact_range(None, None)
    db.close()
    compacted = dir_bytes(path)
    return StateReport(
        events=n,
        impressions=imps,
        clicks=clicks,
        seconds=seconds,
        flushed=flushed,
        compacted=compacted,
        keys=dict(sorted(counts.items())),
        logical_bytes=logical,
    )


def print_state(report: StateReport) -> None:
    rows = []
    for name, sizes in (
        ("after flush + close", report.flushed),
        ("after full compaction", report.compacted),
    ):
        rows.append(
            [
                name,
                mib(sizes["total"]),
                mib(sizes["sst"]),
                mib(sizes["wal"]),
                mib(sizes["other"]),
                f"{report.per_event(sizes):,.1f}",
                f"{report.mib_per_million(sizes):,.1f}",
            ]
        )
    headers = ["state on disk", "total", "sst", "wal", "other", "bytes/event", "MiB/million"]
    say(render_table(headers, rows))
    total_keys = sum(report.keys.values())
    shown = ", ".join(f"{name} {count:,}" for name, count in report.keys.items())
    say(
        f"{report.events:,} events buffered ({report.impressions:,} impressions, "
        f"{report.clicks:,} clicks) in {report.seconds:.1f}s "
        f"({report.events / max(report.seconds, 1e-9):,.0f}/s in process)"
    )
    say(
        f"{total_keys:,} keys ({shown}); keys + values {mib(report.logical_bytes)} "
        f"({report.logical_bytes / report.events:,.1f} bytes/event)"
    )


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def summary_rows(
    tp: ThroughputReport | None, lat: LatencyReport | None, st: StateReport | None
) -> list[list[str]]:
    """The final table's rows: figure, value, target, verdict."""
    rows = []
    if tp is not None:
        if tp.peer is not None:
            rows.append(["peer (faust, count only) records/s", fmt_rate(tp.peer.rate), "", ""])
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
    if lat is not None and lat.received is not None:
        r = lat.received
        rows.append(["latency p50 / p95 ms", f"{r.p50:,.0f} / {r.p95:,.0f}", "", ""])
        rows.append(
            [
                f"latency p99 ms (grace {lat.grace_ms} ms)",
                f"{r.p99:,.0f}",
                f"<= {lat.target_ms:,}",
                verdict(lat.ok),
            ]
        )
        rows.append(["latency max ms", f"{r.max:,.0f}", "", ""])
        late = int(lat.traffic.join_stats.get("late", 0))
        rows.append(["late records (latency run)", f"{late:,}", "0", verdict(late == 0)])
        if lat.missing:
            rows.append(["clicks without an outcome", f"{lat.missing:,}", "0", verdict(False)])
    if lat is not None and lat.received is None:
        rows.append(
            ["latency: clicks with an outcome", "0", f"{len(lat.traffic.sent):,}", "NOT met"]
        )
    if st is not None:
        rows.append(
            [
                "state MiB per million buffered events",
                f"{st.mib_per_million(st.flushed):,.1f}",
                "(no target)",
                "-",
            ]
        )
        rows.append(
            ["  same, fully compacted", f"{st.mib_per_million(st.compacted):,.1f}", "", "-"]
        )
    return rows


def run_on_broker(
    args: argparse.Namespace, workdir: Path, run_id: str
) -> tuple[ThroughputReport | None, LatencyReport | None]:
    """Parts 1 and 2, on one embedded broker."""
    tp = lat = None
    with EmbeddedBroker(BrokerOptions(port=0)) as broker:
        say(f"embedded broker on {broker.bootstrap}; run id {run_id}")
        if not args.skip_throughput:
            tp = run_throughput(args, broker, workdir, run_id)
            say()
            print_throughput(tp)
            say()
        if not args.skip_latency:
            rate = latency_rate(tp.streamjoin.rate if tp else None, args.latency_rate)
            if rate is None:
                raise BenchError("no rate for the latency run: give --latency-rate")
            per = tp.backlog.records_per_impression if tp else records_per_impression(args.seed)
            lat = run_latency(args, broker, workdir, run_id, rate, per)
            say()
            print_latency(lat)
            say()
    return tp, lat


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit 0 when every measured target is met, 1 when one is
    missed, 2 on bad arguments or a run that could not finish."""
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the workers and the broker are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    run_id = f"bj{os.getpid()}-{int(time.time()) % 100_000}"
    tp = lat = st = None
    workdir = Path(tempfile.mkdtemp(prefix="sj-bench-join-"))
    say(f"working directory (worker logs, data): {workdir}")
    try:
        if not (args.skip_throughput and args.skip_latency):
            tp, lat = run_on_broker(args, workdir, run_id)
        if not args.skip_state:
            st = run_state(args, workdir)
            say()
            print_state(st)
            say()
    except BenchError as exc:
        say(f"error: {exc}")
        say(f"(worker logs and data kept in {workdir})")
        return 2
    except BaseException:
        say(f"(worker logs and data kept in {workdir})")
        raise
    if args.keep:
        say(f"(worker logs and data kept in {workdir})")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    say("summary")
    rows = summary_rows(tp, lat, st)
    say(render_table(["figure", "value", "target", "verdict"], rows))
    ok = all(row[3] != verdict(False) for row in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
