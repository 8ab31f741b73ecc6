"""Join benchmark: throughput against a ceiling and two peers, end-to-end latency, state size.

One run, one embedded broker, three parts (each can be skipped or sized down):

1. **Throughput.** A backlog of ``--impressions`` impressions and their clicks
   (the example's seeded generator, no malformed records; 800,000 impressions
   are about 980,000 records) is produced to fresh topics as fast as possible.
   Then, one after the other, each in a process of its own and with its own
   consumer group, these passes read the whole backlog:

   * *ceiling*: a bare ``AIOKafkaConsumer`` counting what ``getmany`` returns
     (``bare_consumer.py``);
   * *faust*: a plain ``faust.App`` (faust-streaming's defaults) whose one agent
     over both topics only counts records (``peer_app.py``): the ceiling
     of reading the input through faust;
   * *streamjoin at its defaults*: one worker of ``streamjoin.ads.app`` with the
     live per-campaign table on;
   * *streamjoin, the join alone*: the same with the live table off;
   * *Quix Streams*: ``join_interval`` of the two topics (``quix_app.py``; the
     ``bench`` extra; "not run: <reason>" when it cannot run);
   * faust again, after the others (the machine's load drifts during a
     run): the faster of its two passes is the one compared.

   With ``--metrics-cost`` the join alone runs again while this process GETs
   the worker's ``/metrics`` every second, then unscraped once more
   (``--metrics-rounds`` times), and the scraped and unscraped rates are
   printed side by side with their ratio (issue 40: target >= 95%;
   ``metrics_cost.py``).

   With ``--large-impressions`` (default 4,000,000, about 4.9M records; 0 skips
   it) the ceiling and the join alone also read a larger backlog, and the join's
   rate on it over its rate on the main one is reported (target: within 15%).

   Every pass is watched the same way: its count (``GET /bench/count/``, or the
   join's ``stats.processed`` on ``GET /streamjoin/joins/``) is polled every
   0.1 s; the rate is the records counted between the first poll that sees a
   processed record and the first poll that sees all of them, over the time
   between the two, so start-up and the group join are not timed. One table
   gives each pass's rate, its share of the ceiling on the same backlog, the
   peak RSS of its process and, for the joins, changelog records per input record.

1b. **Scaling.** The same measurement for one worker on backlogs of 1 and 2
   partitions and for two workers of one group on part 1's backlog
   (``scaling.py``), beside part 1's one worker on 4 partitions.

2. **End-to-end latency.** A fresh streamjoin worker with a small grace gets
   the generator's events paced in real time (event time = wall clock) at
   each ``--latency-rate`` (default 1,000, 4,000 and 20,000 records/s, p99
   target grace + 0.5 s at each), one run per rate; the three outcome topics
   are consumed in this process. A click's latency is the time its outcome
   was received (and, second figure, the outcome record's Kafka timestamp, set
   by the join's producer at send time) minus the wall time the click was
   produced. An outcome is final only once
   decision time (the slower input's watermark) passes ``click.ts + grace``, so
   latency is about the grace.

2b. **Takeover.** Two workers share the tasks under paced traffic
   (``--takeover-rate``); one is killed with SIGKILL and the other takes its
   tasks over with their backlog. Each task's longest wait from a record's
   append to its batch, before and after the kill; target: a kept task waits
   at most one batch longer (``takeover.py``).

3. **State size.** In this process, ``--state-events`` generator events go
   through ``AdAttribution(...).task(BatchState over RocksDB)`` with a window
   so long that nothing expires, committed every ``--state-commit-every``
   events as the operator does; the database is flushed and closed and its
   directory's bytes are divided by the events buffered.

The parts are ``throughput.py`` (with ``metrics_cost.py``), ``scaling.py``,
``latency.py`` and ``state.py``, over the shared ``benchmarks/harness``; this
file is their command line and summary.

    python -m benchmarks.join [--impressions 800000] [--large-impressions 4000000]
                              [--latency-seconds 30] [--latency-rate N ...]
                              [--state-events 1000000] [--skip-throughput] [--skip-quix]
                              [--skip-scaling] [--skip-latency] [--skip-state]
                              [--metrics-cost [--metrics-rounds 1]]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness.report import fmt_rate, render_table, say, verdict
from benchmarks.harness.workers import (
    BenchError,
    embedded_broker,
    exit_on_sigterm,
    run_directory,
)
from benchmarks.join import latency, scaling, state, takeover, throughput
from benchmarks.join.latency import LatencyReport
from benchmarks.join.scaling import ScalingRun
from benchmarks.join.state import StateReport
from benchmarks.join.takeover import TakeoverReport
from benchmarks.join.throughput import BACKLOG_JITTER_MS, ThroughputReport


def build_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.join",
        description=(__doc__ or "").splitlines()[0],
        allow_abbrev=False,
    )
    add = p.add_argument
    add("--seed", type=int, default=1, help="generator seed [%(default)s]")
    add("--partitions", type=int, default=4, help="partitions of the input topics [%(default)s]")
    t = p.add_argument_group("throughput")
    t.add_argument("--impressions", type=int, default=800_000, help="backlog size [%(default)s]")
    t.add_argument(
        "--large-impressions",
        type=int,
        default=4_000_000,
        help="the large backlog's size, for the join alone; 0 skips it [%(default)s]",
    )
    t.add_argument("--grace-ms", type=int, default=10_000, help="the join's grace [%(default)s]")
    t.add_argument(
        "--timeout", type=float, default=900.0, help="per worker run, seconds [%(default)s]"
    )
    t.add_argument("--skip-throughput", action="store_true", help="skip part 1")
    t.add_argument("--skip-peer", action="store_true", help="part 1 without the faust peer")
    t.add_argument("--skip-quix", action="store_true", help="part 1 without Quix Streams")
    t.add_argument("--skip-ceiling", action="store_true", help="part 1 without the ceiling")
    t.add_argument(
        "--skip-live", action="store_true", help="part 1 without the app at its defaults"
    )
    t.add_argument("--skip-scaling", action="store_true", help="skip the scaling table (part 1b)")
    t.add_argument(
        "--metrics-cost",
        action="store_true",
        help="part 1 also runs the join alone while GET /metrics every second, then "
        "unscraped again, and compares the rates (issue 40)",
    )
    t.add_argument(
        "--metrics-rounds",
        type=int,
        default=1,
        help="with --metrics-cost: rounds of a scraped and an unscraped pass [%(default)s]",
    )
    lat = p.add_argument_group("latency")
    lat.add_argument(
        "--latency-seconds", type=float, default=30.0, help="measured seconds [%(default)s]"
    )
    lat.add_argument(
        "--latency-rate",
        type=float,
        action="append",
        help="records/s of a latency run; repeat for several "
        "(default: 1000, 4000 and 20000; p99 target grace + 0.5 s at each)",
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
    tk = p.add_argument_group("takeover (part 2b)")
    tk.add_argument("--takeover-rate", type=float, default=8_000.0, help="records/s [%(default)s]")
    tk.add_argument(
        "--takeover-before",
        type=float,
        default=15.0,
        help="seconds of traffic before one worker is killed [%(default)s]",
    )
    tk.add_argument(
        "--takeover-after",
        type=float,
        default=30.0,
        help="seconds of traffic after the kill [%(default)s]",
    )
    tk.add_argument("--skip-takeover", action="store_true", help="skip part 2b")
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
        args.large_impressions == 0 or args.large_impressions >= 1_000,
        "--large-impressions",
        "must be 0 (skip) or >= 1000",
        args.large_impressions,
    )
    need(
        args.grace_ms >= BACKLOG_JITTER_MS,
        "--grace-ms",
        f"must be >= the backlog's generator jitter ({BACKLOG_JITTER_MS} ms) so no record is late",
        args.grace_ms,
    )
    need(finite_positive(args.timeout), "--timeout", "must be a positive number", args.timeout)
    need(args.metrics_rounds >= 1, "--metrics-rounds", "must be >= 1", args.metrics_rounds)
    if args.metrics_cost and args.skip_throughput:
        problems.append("--metrics-cost: needs part 1, which --skip-throughput skips")
    need(
        finite_positive(args.latency_seconds),
        "--latency-seconds",
        "must be a positive number",
        args.latency_seconds,
    )
    for rate in args.latency_rate or ():
        need(
            finite_positive(rate), "--latency-rate", "must be a positive number of records/s", rate
        )
    need(args.latency_grace_ms >= 0, "--latency-grace-ms", "must be >= 0", args.latency_grace_ms)
    need(
        0 <= args.latency_jitter_ms <= max(args.latency_grace_ms, 0),
        "--latency-jitter-ms",
        f"must be in [0, --latency-grace-ms ({args.latency_grace_ms})] so no record is late",
        args.latency_jitter_ms,
    )
    for flag in ("takeover_rate", "takeover_before", "takeover_after"):
        value = getattr(args, flag)
        need(
            finite_positive(value),
            "--" + flag.replace("_", "-"),
            "must be a positive number",
            value,
        )
    need(args.state_events >= 1, "--state-events", "must be >= 1", args.state_events)
    need(
        args.state_commit_every >= 1,
        "--state-commit-every",
        "must be >= 1",
        args.state_commit_every,
    )
    if args.skip_throughput and args.skip_latency and args.skip_takeover and args.skip_state:
        problems.append(
            "--skip-throughput --skip-latency --skip-takeover --skip-state: nothing left to run"
        )
    return problems


def summary_rows(
    tp: ThroughputReport | None,
    lat: LatencyReport | Sequence[LatencyReport] | None,
    st: StateReport | None,
    scaled: Sequence[ScalingRun] = (),
    took: TakeoverReport | None = None,
) -> list[list[str]]:
    """The final table's rows: figure, value, target, verdict."""
    rows = []
    if tp is not None:
        rows += throughput.summary_rows(tp)
    for run in scaled:
        rows.append([f"scaling: {run.label} records/s", fmt_rate(run.rate), "", ""])
    for one in [lat] if isinstance(lat, LatencyReport) else lat or ():
        rows += latency.summary_rows(one)
    if took is not None:
        rows += takeover.summary_rows(took)
    if st is not None:
        rows += state.summary_rows(st)
    return rows


def run_on_broker(
    args: argparse.Namespace, workdir: Path, run_id: str
) -> tuple[ThroughputReport | None, list[ScalingRun], list[LatencyReport], TakeoverReport | None]:
    """Parts 1, 1b, 2 and 2b, on one embedded broker."""
    tp = took = None
    scaled: list[ScalingRun] = []
    lats: list[LatencyReport] = []
    with embedded_broker() as broker:
        say(f"embedded broker on {broker.bootstrap}; run id {run_id}")
        if not args.skip_throughput:
            tp = throughput.run_throughput(args, broker, workdir, run_id)
            say()
            throughput.print_throughput(tp)
            say()
            if not args.skip_scaling:
                scaled = scaling.run_scaling(args, broker, workdir, run_id, tp)
                say()
                scaling.print_scaling(scaled, tp.peer.rate if tp.peer else None)
                say()
        if not args.skip_latency:
            if tp:
                per = tp.backlog.records_per_impression
            else:
                per = latency.records_per_impression(args.seed)
            for rate in args.latency_rate or latency.DEFAULT_RATES:
                lat = latency.run_latency(args, broker, workdir, run_id, rate, per)
                say()
                latency.print_latency(lat)
                say()
                lats.append(lat)
        if not args.skip_takeover:
            per = (
                tp.backlog.records_per_impression
                if tp
                else latency.records_per_impression(args.seed)
            )
            took = takeover.run_takeover(args, broker, workdir, run_id, per)
            say()
            takeover.print_takeover(took)
            say()
    return tp, scaled, lats, took


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit 0 when every measured target is met, 1 when one is
    missed, 2 on bad arguments or a run that could not finish."""
    args = parse_args(argv)
    exit_on_sigterm()
    run_id = f"bj{os.getpid()}-{int(time.time()) % 100_000}"
    tp = st = None
    scaled: list[ScalingRun] = []
    lats: list[LatencyReport] = []
    took = None
    try:
        with run_directory("sj-bench-join-", keep=args.keep) as workdir:
            if not (args.skip_throughput and args.skip_latency and args.skip_takeover):
                tp, scaled, lats, took = run_on_broker(args, workdir, run_id)
            if not args.skip_state:
                st = state.run_state(args, workdir)
                say()
                state.print_state(st)
                say()
    except BenchError as exc:
        say(f"error: {exc}")
        return 2
    say("summary")
    rows = summary_rows(tp, lats, st, scaled, took)
    say(render_table(["figure", "value", "target", "verdict"], rows))
    ok = all(row[3] != verdict(False) for row in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
