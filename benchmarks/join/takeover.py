"""Join benchmark, part 2b: do a worker's kept tasks wait behind the backlog of tasks it takes over?

Two workers of the ad app (the join alone) share the input's tasks while the
generator's events are produced in real time at ``--takeover-rate`` records/s.
After ``--takeover-before`` seconds one worker is killed (SIGKILL to its
process group); the other takes its tasks over once the group notices
(session timeout), and with them the backlog that built up meanwhile. Traffic
goes on for ``--takeover-after`` seconds more.

A record's **wait** is the time from its append (the producer's ack, here)
to the first look at the surviving worker's ``GET /streamjoin/joins/`` (every
0.1 s) whose task position is past its offset: the record was taken into a
batch. A task the survivor owned before the kill is **kept**, the others
were **taken over**. The **catch-up** runs from the first look at which a
taken-over task has applied a record to the first at which both have
applied everything appended before it. Per task the table gives the longest
wait of the records appended before the kill (and applied before it), from
the kill to the catch-up (the group noticing and rebalancing) and during the
catch-up. The survivor's batches show in its ``stats.batches``: the longest
time between two looks that saw the count change is at least its longest
batch.

The target (issue 38): a kept task's records never wait behind the taken-over
tasks' backlog for longer than one batch, that is, its longest wait during
the catch-up is at most its longest wait before the kill plus the survivor's
longest batch in the catch-up. The look itself is answered between batches,
so waits are measured to within a look's interval.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import collections
import itertools
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import ads
from benchmarks.harness.kafka import create_topics, send_paced
from benchmarks.harness.report import Progress, render_table, say, verdict
from benchmarks.harness.workers import BenchError, Workers
from streamjoin.dev.broker import EmbeddedBroker

#: (partition, side) -> (offset, monotonic time of its ack) of every record appended
Appended = dict[tuple[int, str], list[tuple[int, float]]]

#: seconds between looks at the surviving worker's join
LOOK_INTERVAL_S = 0.1
#: seconds the workers get to start and share the tasks
START_TIMEOUT_S = 120.0
#: seconds the survivor gets to apply everything produced, after the traffic
DRAIN_TIMEOUT_S = 60.0


@dataclass
class Look:
    """One answer of the survivor: when, its tasks' positions, its batch count."""

    at: float
    #: task -> side -> next offset to apply
    positions: dict[int, dict[str, int | None]]
    batches: int


@dataclass
class TakeoverReport:
    record_rate: float
    kept: list[int]
    taken: list[int]
    killed_at: float
    #: the catch-up's first and last look (monotonic seconds)
    catch_up: tuple[float, float] = (0.0, 0.0)
    #: task -> longest waits (s): before the kill, kill to catch-up, in the catch-up
    waits: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    #: records of each task appended before the catch-up and applied in it or later
    backlog: dict[int, int] = field(default_factory=dict)
    #: the survivor's longest batch in the catch-up (seconds, a lower bound)
    longest_batch: float = 0.0
    #: records produced but never seen applied (the survivor fell behind the drain timeout)
    unapplied: int = 0

    @property
    def kept_extra(self) -> float:
        """The most any kept task waited in the catch-up beyond its wait before the kill."""
        return max((self.waits[t][2] - self.waits[t][0] for t in self.kept), default=0.0)

    @property
    def ok(self) -> bool:
        return not self.unapplied and self.kept_extra <= self.longest_batch + LOOK_INTERVAL_S


def _tasks(workers: Workers, name: str) -> list[int]:
    doc = workers.get(name, "/streamjoin/joins/") or {}
    return sorted(int(t) for t in doc.get(ads.JOIN_NAME, {}).get("tasks", {}))


def _look(workers: Workers, name: str) -> Look | None:
    doc = workers.get(name, "/streamjoin/joins/")
    at = time.monotonic()
    try:
        join = doc[ads.JOIN_NAME]  # type: ignore[index]
        positions = {int(t): dict(v["position"]) for t, v in join["tasks"].items()}
        return Look(at, positions, int(join["stats"]["batches"]))
    except (KeyError, TypeError, ValueError):
        return None


def _watch(workers: Workers, name: str, looks: list[Look], stop: threading.Event) -> None:
    while not stop.is_set():
        look = _look(workers, name)
        if look is not None:
            looks.append(look)
        stop.wait(LOOK_INTERVAL_S)


async def _produce(bootstrap: str, config: Any, sides: dict[str, str], appended: Appended) -> None:
    """Produce *config*'s events paced on the wall clock; note each one's
    (offset, monotonic ack time) per (partition, side)."""
    from aiokafka import AIOKafkaProducer

    from streamjoin.ads import generator

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2)
    await producer.start()

    def note(side: str, future: asyncio.Future[Any]) -> None:
        if not future.cancelled() and future.exception() is None:
            meta = future.result()
            appended[(meta.partition, side)].append((meta.offset, time.monotonic()))

    try:
        started = time.monotonic()
        progress = Progress(started)
        sent = 0
        async for event, future, _ in send_paced(producer, generator.generate(config)):
            side = sides[event.topic]
            future.add_done_callback(lambda f, s=side: note(s, f))
            sent += 1
            if progress.due(time.monotonic()):
                say(f"  {time.monotonic() - started:.0f}s: {sent:,} records sent")
    finally:
        await producer.stop()


def _marks(looks: list[Look], task: int, side: str) -> list[tuple[float, int]]:
    """(time, position) of *task*'s *side* at each look (-1: not running there)."""
    return [(look.at, look.positions.get(task, {}).get(side) or -1) for look in looks]


def _catch_up(looks: list[Look], appended: Appended, taken: list[int]) -> tuple[float, float]:
    """The catch-up's first and last look (see the module docstring)."""
    start = next(
        (look.at for look in looks if any(look.positions.get(t, {}).get("left") for t in taken)),
        None,
    )
    if start is None:
        raise BenchError("the survivor never ran the tasks of the worker killed")
    end = start
    for (task, side), records in sorted(appended.items()):
        if task not in taken:
            continue
        target = max((o for o, acked in records if acked <= start), default=-1)
        reached = next((at for at, p in _marks(looks, task, side) if p > target), None)
        if reached is None:
            raise BenchError(f"task {task} never caught up with its backlog")
        end = max(end, reached)
    return start, end


def _waits(looks: list[Look], appended: Appended, report: TakeoverReport) -> None:
    """Each task's longest waits before the kill, up to the catch-up and in it."""
    killed = report.killed_at
    start, end = report.catch_up
    for (task, side), records in sorted(appended.items()):
        records.sort()
        # positions only grow: walk the looks once per (task, side)
        marks = _marks(looks, task, side)
        times = [at for at, _ in marks]
        i = 0
        waits = list(report.waits.get(task, (0.0, 0.0, 0.0)))
        for offset, acked in records:
            i = max(i, bisect.bisect_left(times, acked))
            while i < len(marks) and marks[i][1] <= offset:
                i += 1
            if i == len(marks):
                report.unapplied += 1
                continue
            applied = marks[i][0]
            if acked < start <= applied:
                report.backlog[task] = report.backlog.get(task, 0) + 1
            if applied < killed:
                waits[0] = max(waits[0], applied - acked)
            elif killed <= acked < start:
                waits[1] = max(waits[1], applied - acked)
            elif start <= acked <= end:
                waits[2] = max(waits[2], applied - acked)
        report.waits[task] = (waits[0], waits[1], waits[2])


def _longest_batch(looks: list[Look], start: float, end: float) -> float:
    """The longest time between two looks (from *start* to *end*) that saw the
    batch count change."""
    changes = [
        b.at
        for a, b in itertools.pairwise(looks)
        if b.batches != a.batches and start <= b.at <= end
    ]
    return max((b - a for a, b in itertools.pairwise(changes)), default=0.0)


def run_takeover(
    args: argparse.Namespace,
    broker: EmbeddedBroker,
    workdir: Path,
    run_id: str,
    per_impression: float,
) -> TakeoverReport:
    """The run (see the module docstring)."""
    rate = args.takeover_rate
    say(
        f"takeover: 2 workers, {rate:,.0f} records/s, one killed after "
        f"{args.takeover_before:g}s, {args.takeover_after:g}s more ..."
    )
    config = ads.settings(f"{run_id}-take", f"{run_id}-take-", args.partitions, 2_000)
    topics = config.topics
    asyncio.run(
        create_topics(broker.bootstrap, [*topics.inputs, *topics.outcomes], args.partitions)
    )
    sides = {topics.impressions: "left", topics.clicks: "right"}
    with Workers(ads.APP, broker, workdir, config.to_env(), kill=True) as workers:
        for name in ("survivor", "victim"):
            workers.start(name)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            workers.check()
            mine, theirs = _tasks(workers, "survivor"), _tasks(workers, "victim")
            if mine and theirs and len(mine) + len(theirs) == args.partitions:
                break
            if time.monotonic() > deadline:
                raise BenchError(
                    f"the two workers did not share the tasks; logs: {workers.log_path}"
                )
            time.sleep(0.5)
        say(f"  survivor runs tasks {mine}, victim {theirs}")
        looks: list[Look] = []
        stop = threading.Event()
        watcher = threading.Thread(target=_watch, args=(workers, "survivor", looks, stop))
        watcher.start()
        start_ms = int(time.time() * 1000) + 200
        duration_ms = round((args.takeover_before + args.takeover_after) * 1000)
        traffic = ads.paced_traffic(
            config, args.seed, start_ms, duration_ms, rate / per_impression, 1_000
        )
        appended: Appended = collections.defaultdict(list)
        killed: list[float] = []

        def kill() -> None:
            time.sleep(max(0.0, start_ms / 1000 + args.takeover_before - time.time()))
            killed.append(time.monotonic())
            workers.processes["victim"].kill()
            say("  victim killed (SIGKILL)")

        killer = threading.Thread(target=kill)
        killer.start()
        try:
            asyncio.run(_produce(broker.bootstrap, traffic, sides, appended))
            last = {key: max(o for o, _ in records) for key, records in appended.items()}
            deadline = time.monotonic() + DRAIN_TIMEOUT_S
            while time.monotonic() < deadline:
                look = looks[-1] if looks else None
                if look and all(
                    (look.positions.get(t, {}).get(s) or 0) > o for (t, s), o in last.items()
                ):
                    break
                time.sleep(0.5)
        finally:
            stop.set()
            watcher.join()
            killer.join()
    report = TakeoverReport(rate, mine, theirs, killed[0])
    report.catch_up = _catch_up(looks, appended, theirs)
    _waits(looks, appended, report)
    report.longest_batch = _longest_batch(looks, *report.catch_up)
    return report


def print_takeover(report: TakeoverReport) -> None:
    """Per task its waits and backlog, then the verdict."""
    rows = []
    for task in sorted(report.waits):
        waits = report.waits[task]
        kind = "kept" if task in report.kept else "taken over"
        rows.append(
            [str(task), kind, *(f"{w:.2f}" for w in waits), f"{report.backlog.get(task, 0):,}"]
        )
    start, end = (t - report.killed_at for t in report.catch_up)
    headers = ["task", "", "wait before s", "to catch-up s", "in catch-up s", "backlog"]
    say(render_table(headers, rows))
    say(
        f"catch-up from {start:.2f}s to {end:.2f}s after the kill; kept tasks waited at most "
        f"{report.kept_extra:.2f}s more in it than before the kill; the survivor's longest "
        f"batch in it: {report.longest_batch:.2f}s (looks every {LOOK_INTERVAL_S}s); "
        f"{report.unapplied:,} records never seen applied: {verdict(report.ok)}"
    )


def summary_rows(report: TakeoverReport) -> list[list[str]]:
    """The summary's rows: figure, value, target, verdict."""
    at = f"at {report.record_rate:,.0f}/s"
    return [
        [
            f"kill -9: kept tasks' extra wait in the catch-up s {at}",
            f"{report.kept_extra:.2f}",
            f"<= 1 batch ({report.longest_batch:.2f})",
            verdict(report.ok),
        ]
    ]
