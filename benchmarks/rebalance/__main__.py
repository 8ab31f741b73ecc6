"""Rebalance benchmark: how long each task stops when the group changes, with large state.

One run, one embedded broker, the variants side by side, each with its own
app id (topics, consumer group) and the same inputs:

* ``cooperative``: streamjoin's assignor and restoration with warm-ups
  (``max_warmup_replicas`` unset: a task moves only once its new owner caught
  up), rebalancing cooperatively (``STREAMJOIN_COOPERATIVE=1``, the
  default);
* ``eager``: the same, rebalancing eagerly (``STREAMJOIN_COOPERATIVE=0``;
  called ``warm-ups`` before 2026-11-26);
* ``faust``: faust-streaming's own assignor and recovery;
* ``cold``, only when named in ``--variants``: ``eager`` with
  ``STREAMJOIN_MAX_WARMUP_REPLICAS=0`` (a task moves at once and its new
  owner restores it before it runs).

Every variant runs ``app.py`` (one RocksDB table written by every
input record, one standby per task). Its changelog is first filled with
``--state-records`` records, so that restoring a task from nothing takes
seconds. Two workers start and settle (their actives and standbys restored),
while records are produced at ``--rate`` records/s over all partitions for the
whole run. Then three phases of ``--phase-seconds`` each:

1. **scale-out**: a third worker starts;
2. **scale-in**: that worker stops (SIGTERM);
3. **kill -9**: one of the two remaining workers is killed.

faust's producer sends one record per batch (its recovery needs that on the
embedded broker); ``--one-record-batches all`` does the same for every
variant (every run before 2026-11-27). One record per batch caps a worker's
changelog writes; a task that moved to a worker comes with a backlog, and
its worker's kept tasks, whose records queue behind it in the agent's one
stream, then wait until it is written. With ``--workdir`` every phase's
progress times are kept there (``<variant>-<phase>-progress.json``, seconds
since the phase began), to find where a gap lies.

A task's progress is its changelog: each record's timestamp is when the
worker that ran the task sent it. The **gap** of a task in a phase is the
longest stretch of the phase without a record of its partition (the phase's
start and end count as bounds). The owners of the tasks at the start and end
of each phase come from ``GET /bench/tasks/`` of each worker; a task that
kept its owner stops only for the rebalance itself, so the longest gap of
those is the phase's **rebalance pause**. The table gives, per phase and
variant, the worst gap of any task, the worst of the tasks that moved, the
pause, the rebalances the busiest worker went through (faust's count) and
ratios against ``eager``.

    python -m benchmarks.rebalance [--partitions 6] [--state-records 600000]
                                   [--rate 300] [--phase-seconds 45]
                                   [--session-timeout 2]
                                   [--variants cooperative,eager,faust]
                                   [--one-record-batches faust|all]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.report import render_table, say
from benchmarks.harness.workers import (
    BenchError,
    Workers,
    embedded_broker,
    exit_on_sigterm,
    run_directory,
)
from benchmarks.rebalance.traffic import Traffic, prefill, task_gaps
from streamjoin.dev.broker import EmbeddedBroker

#: the app every variant runs (``SJ_BENCH_KIND`` picks streamjoin's or faust's)
APP = "benchmarks.rebalance.app:app"
#: variant -> (app kind, extra environment)
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "cooperative": ("streamjoin", {"STREAMJOIN_COOPERATIVE": "1"}),
    "eager": ("streamjoin", {"STREAMJOIN_COOPERATIVE": "0"}),
    "cold": (
        "streamjoin",
        {"STREAMJOIN_COOPERATIVE": "0", "STREAMJOIN_MAX_WARMUP_REPLICAS": "0"},
    ),
    "faust": ("faust", {}),
}
#: the variants a run without ``--variants`` compares
DEFAULT_VARIANTS = ("cooperative", "eager", "faust")
#: the variant the ratios are taken against
BASE = "eager"
PHASES = ("scale-out", "scale-in", "kill -9")


@dataclass(frozen=True)
class Phase:
    """One phase of one variant: each task's gap, and which tasks changed owner."""

    variant: str
    name: str
    gaps: dict[int, float]
    moved: frozenset[int]
    #: the phase's length: a gap this long means no progress in the whole phase
    window: float = 0.0
    #: rebalances the busiest running worker went through (``None``: unknown)
    rebalances: int | None = None

    @property
    def worst(self) -> float:
        """The longest gap of any task (seconds)."""
        return max(self.gaps.values(), default=0.0)

    @property
    def worst_moved(self) -> float | None:
        """The longest gap of a task that changed owner (``None``: none did)."""
        moved = [g for t, g in self.gaps.items() if t in self.moved]
        return max(moved) if moved else None

    @property
    def pause(self) -> float | None:
        """The longest gap of a task that kept its owner: the rebalance itself."""
        kept = [g for t, g in self.gaps.items() if t not in self.moved]
        return max(kept) if kept else None


def owners(group: Workers) -> dict[int, str]:
    """Task -> the worker that says it runs it (running workers only)."""
    out: dict[int, str] = {}
    for name, doc in group.answers("/bench/tasks/").items():
        for task in (doc or {}).get("tasks", []):
            out.setdefault(int(task), name)
    return out


def rebalance_counts(group: Workers) -> dict[str, int]:
    """Worker -> the rebalances it went through so far (running workers only)."""
    return {
        name: int(doc["rebalances"])
        for name, doc in group.answers("/bench/tasks/").items()
        if doc and doc.get("rebalances") is not None
    }


def pacing(group: Workers) -> dict[str, dict[str, float]]:
    """Worker -> its standby follower's pacing totals (streamjoin's restoration only)."""
    return {
        name: doc["standby_pacing"]
        for name, doc in group.answers("/bench/tasks/").items()
        if doc and doc.get("standby_pacing")
    }


def settle(
    group: Workers, traffic: Traffic, partitions: int, seconds: float, timeout: float
) -> None:
    """Wait until every task has an owner and progresses, then *seconds* more
    (standbys catch up meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        found = owners(group)
        fresh = traffic.progressing(time.time() - 1.0)
        if len(found) == partitions and fresh >= set(range(partitions)):
            break
        group.check()
        if time.monotonic() > deadline:
            raise BenchError(f"no steady state after {timeout:.0f}s: owners {found}")
        time.sleep(0.5)
    time.sleep(seconds)


def variant_env(variant: str, args: argparse.Namespace) -> dict[str, str]:
    """The environment of a variant's workers (``app.py`` reads it)."""
    kind, extra = VARIANTS[variant]
    return {
        "SJ_BENCH_KIND": kind,
        "SJ_BENCH_APP_ID": f"bench-rebalance-{variant.replace(' ', '-')}",
        "SJ_BENCH_PARTITIONS": str(args.partitions),
        "SJ_BENCH_SESSION_TIMEOUT": str(args.session_timeout),
        "SJ_BENCH_ONE_RECORD_BATCHES": "1" if one_record_batches(variant, args) else "0",
        **extra,
    }


def one_record_batches(variant: str, args: argparse.Namespace) -> bool:
    """Does *variant*'s producer send one record per batch? faust's always (its
    recovery needs it on the embedded broker); the others with ``--one-record-batches all``."""
    return VARIANTS[variant][0] == "faust" or args.one_record_batches == "all"


def run_variant(
    variant: str, broker: EmbeddedBroker, root: Path, args: argparse.Namespace
) -> list[Phase]:
    """Start two workers, then run the three phases; the workers are always killed."""
    env = variant_env(variant, args)
    app_id = env["SJ_BENCH_APP_ID"]
    say(f"{variant}: filling {app_id}-state-changelog with {args.state_records:,} records")
    prefill(broker.bootstrap, app_id, args.partitions, args.state_records, args.value_size)
    traffic = Traffic(broker.bootstrap, app_id, args.partitions, args.rate, args.value_size)
    try:
        with Workers(APP, broker, root / variant, env, kill=True) as group:
            traffic.start()
            for name in ("w1", "w2"):
                group.start(name)
            settle(group, traffic, args.partitions, args.settle_seconds, args.timeout)
            say(f"{variant}: two workers running every task; phases of {args.phase_seconds:.0f}s")
            actions = {
                "scale-out": lambda: group.start("w3"),
                "scale-in": lambda: group.processes["w3"].stop(),
                "kill -9": lambda: group.processes["w2"].kill(),
            }
            return [
                run_phase(variant, name, actions[name], group, traffic, args) for name in PHASES
            ]
    finally:
        traffic.stop()  # after the workers


def run_phase(
    variant: str,
    name: str,
    action: Callable[[], object],
    group: Workers,
    traffic: Traffic,
    args: argparse.Namespace,
) -> Phase:
    """*action*, then the rest of the phase: each task's gap, and which tasks moved."""
    before = owners(group)
    counted = rebalance_counts(group)
    started = time.time()
    action()
    time.sleep(max(0.0, started + args.phase_seconds - time.time()))
    after = owners(group)
    ended = time.time()
    if not traffic.wait_read_up_to(ended):
        say(f"  {name}: the changelog reader did not catch up within 30s")
    gaps = task_gaps(traffic.times(), started, ended, range(args.partitions))
    if args.workdir:  # the progress times themselves, to find where a gap lies
        window = {
            t: sorted(x - started for x in times if started <= x <= ended)
            for t, times in traffic.times().items()
        }
        path = Path(args.workdir) / f"{variant}-{name.replace(' ', '')}-progress.json"
        path.write_text(json.dumps({"started": started, "times": window}))
    moved = frozenset(t for t in range(args.partitions) if before.get(t) != after.get(t))
    counts = rebalance_counts(group)
    rebalances = max((n - counted.get(w, 0) for w, n in counts.items()), default=None)
    phase = Phase(variant, name, gaps, moved, ended - started, rebalances)
    each = ", ".join(f"{t}: {g:.1f}" for t, g in sorted(gaps.items()))
    say(
        f"  {name}: worst gap {phase.worst:.1f}s (per task {{{each}}}),"
        f" moved {sorted(moved)}, owners {after}"
    )
    for worker, totals in pacing(group).items():
        say(
            f"    {worker} standby follower so far: {totals['applied']:,} records,"
            f" {totals['busy']:.1f} s busy, {totals['resting']:.1f} s resting"
            f" (share {totals['share']:g})"
        )
    return phase


def _s(value: float | None, window: float = 0.0) -> str:
    if value is None:
        return "-"
    if window and value >= window - 0.05:
        return f">={window:.0f}"  # no progress in the whole phase: the gap is longer
    return f"{value:.1f}"


def report(phases: Sequence[Phase]) -> str:
    """The table: per phase and variant, gaps in seconds and ratios against eager."""
    base = {p.name: p for p in phases if p.variant == BASE}
    rows = []
    for phase in sorted(phases, key=lambda p: (PHASES.index(p.name), p.variant)):
        ref = base.get(phase.name)
        # a gap as long as the phase is a lower bound, and so are its ratios
        at_least = ">=" if phase.window and phase.worst >= phase.window - 0.05 else ""
        ratio = (
            "-" if ref is None or ref.worst <= 0 else f"{at_least}{phase.worst / ref.worst:.1f}x"
        )
        over_pause = (
            "-" if phase.pause in (None, 0.0) else f"{at_least}{phase.worst / phase.pause:.1f}x"
        )
        rows.append(
            [
                f"{phase.name} / {phase.variant}",
                _s(phase.worst, phase.window),
                _s(phase.worst_moved, phase.window),
                _s(phase.pause, phase.window),
                str(len(phase.moved)),
                "-" if phase.rebalances is None else str(phase.rebalances),
                over_pause,
                ratio,
            ]
        )
    headers = [
        "phase / variant",
        "worst gap s",
        "worst moved s",
        "pause s",
        "moved",
        "rebalances",
        "worst/pause",
        f"worst vs {BASE}",
    ]
    return render_table(headers, rows)


def build_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.rebalance",
        description=(__doc__ or "").splitlines()[0],
        allow_abbrev=False,
    )
    add = p.add_argument
    add("--partitions", type=int, default=6, help="tasks [%(default)s]")
    add("--state-records", type=int, default=600_000, help="changelog records [%(default)s]")
    add("--value-size", type=int, default=100, help="bytes per value [%(default)s]")
    add(
        "--rate",
        type=float,
        default=300.0,
        help=(
            "input records/s, all tasks; one worker must keep up with all of them after"
            " the kill -9 [%(default)s]"
        ),
    )
    add("--phase-seconds", type=float, default=45.0, help="length of a phase [%(default)s]")
    add(
        "--settle-seconds",
        type=float,
        default=15.0,
        help="wait after every task runs, before the first phase [%(default)s]",
    )
    add(
        "--session-timeout",
        type=float,
        default=2.0,
        help=(
            "the workers' broker_session_timeout in seconds, the same for every variant;"
            " the embedded broker holds every JoinGroup for about half of it, rounded up"
            " to whole seconds [%(default)s]"
        ),
    )
    add(
        "--one-record-batches",
        choices=("faust", "all"),
        default="faust",
        help=(
            "which variants' producers send one record per batch: faust's only (its"
            " recovery needs it on the embedded broker), or all (as every run before"
            " 2026-11-27; it caps a worker's changelog writes, and a moved task's backlog"
            " then holds up the kept tasks of its worker) [%(default)s]"
        ),
    )
    add("--timeout", type=float, default=600.0, help="to reach a steady state [%(default)s]")
    add(
        "--workdir",
        type=Path,
        default=None,
        help="keep the workers' data and logs here (default: a temporary directory)",
    )
    add(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help="comma-separated subset of " + ", ".join(VARIANTS) + " [%(default)s]",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run every variant, print the table; exit 1 when a variant could not run."""
    args = build_parser().parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    exit_on_sigterm()
    phases: list[Phase] = []
    failed = []
    with (
        run_directory("sj-bench-rebalance-", given=args.workdir) as root,
        embedded_broker() as broker,
    ):
        for variant in variants:
            try:
                phases.extend(run_variant(variant, broker, root, args))
            except BenchError as exc:
                failed.append(variant)
                say(f"{variant}: no figures ({exc})")
    say()
    single = [v for v in variants if one_record_batches(v, args)]
    say(
        f"{args.partitions} tasks, {args.state_records:,} state records, "
        f"{args.rate:g} records/s, phases of {args.phase_seconds:g}s; one record per"
        f" producer batch: {', '.join(single) or 'no variant'}"
    )
    say(report(phases))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
