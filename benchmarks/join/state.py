"""Join benchmark, part 3: RocksDB state size per buffered event, in this process.

Generator events go through ``AdAttribution(...).task(BatchState over RocksDB)`` with a
window so long that nothing expires, committed as the operator does; the database's
directory is measured after flush + close and after a full compaction (see
``__main__.py``).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.measure import dir_bytes
from benchmarks.harness.report import Progress, mib, render_table, say
from streamjoin.ads.keys import FAMILY_NAMES

#: the key faust's RocksDB store keeps a partition's changelog offset under
OFFSET_KEY = b"__faust\0offset__"
#: an attribution window longer than any event time since 1970: nothing expires
NEVER_EXPIRES_MS = 100 * 365 * 24 * 3600 * 1000


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


def run_state(args: argparse.Namespace, workdir: Path) -> StateReport:
    import rocksdict

    from streamjoin.ads import generator
    from streamjoin.ads.policy import AdAttribution
    from streamjoin.faust.join.batch_state import BatchState
    from streamjoin.join import keys
    from streamjoin.join.window import JoinWindow

    total = args.state_events
    config = generator.GeneratorConfig(
        seed=args.seed, impressions=total, malformed_rate=0.0, tail=False, partitions=1
    )
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

    started = time.monotonic()
    progress = Progress(started)
    n = 0
    for n, event in enumerate(itertools.islice(generator.generate(config), total), 1):
        if event.topic == config.impressions_topic:
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
            if progress.due(now):
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
        counts[FAMILY_NAMES.get(key[0], "store offset" if key == OFFSET_KEY else "other")] += 1
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


def summary_rows(st: StateReport) -> list[list[str]]:
    """The summary's state-size rows: figure, value, target, verdict."""
    return [
        [
            "state MiB per million buffered events",
            f"{st.mib_per_million(st.flushed):,.1f}",
            "(no target)",
            "-",
        ],
        ["  same, fully compacted", f"{st.mib_per_million(st.compacted):,.1f}", "", "-"],
    ]
