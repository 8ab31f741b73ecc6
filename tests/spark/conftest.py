"""Spark tests: one local[2] SparkSession, and archives written with pyarrow.

The archive writer here follows the archive contract on its own (schemas,
hive directories, file names), independently of ``streamjoin.ads.spark.archive``,
so the reader is tested against the contract rather than against itself.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from streamjoin.ads.attribution import (  # noqa: E402
    Click,
    ClickOutcome,
    Impression,
    TaskAttribution,
)
from streamjoin.ads.policy import encode_outcome  # noqa: E402
from streamjoin.join.policy import Late  # noqa: E402
from streamjoin.join.window import JoinWindow  # noqa: E402

#: 2026-01-01T00:00:00Z
BASE_TS = 1_767_225_600_000
HOUR = 3_600_000
PARTITIONS = 3

IMPRESSION_SCHEMA = pa.schema(
    [
        ("auction_id", pa.string()),
        ("impression_id", pa.string()),
        ("campaign", pa.string()),
        ("cost", pa.float64()),
        ("ts_ms", pa.int64()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
    ]
)
CLICK_SCHEMA = pa.schema(
    [
        ("auction_id", pa.string()),
        ("click_id", pa.string()),
        ("ts_ms", pa.int64()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
    ]
)
OUTCOME_SCHEMA = pa.schema(
    [
        ("click_id", pa.string()),
        ("auction_id", pa.string()),
        ("click_ts_ms", pa.int64()),
        ("outcome", pa.string()),
        ("impression_id", pa.string()),
        ("campaign", pa.string()),
        ("cost", pa.float64()),
        ("source_topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
    ]
)


def _java_available() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The tests' SparkSession: local[2], 4 shuffle partitions, no UI; stopped at the end."""
    if not _java_available():
        pytest.skip("no Java runtime (PySpark needs Java 17)")
    from streamjoin.ads.spark.session import spark_session

    conf = {
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
    }
    with spark_session("local[2]", conf, app_name="streamjoin-tests") as session:
        yield session


@pytest.fixture(scope="session")
def kit() -> Any:
    """This module: the event, stream-simulation and archive helpers below."""
    return sys.modules[__name__]


# -- events -------------------------------------------------------------------------------


def partition_of(auction_id: str, partitions: int = PARTITIONS) -> int:
    """A stable partition per auction (both input topics agree)."""
    return zlib.crc32(auction_id.encode()) % partitions


@dataclass
class Events:
    """Impressions and clicks as archive rows (dicts with the contract's columns)."""

    impressions: list[dict[str, Any]] = field(default_factory=list)
    clicks: list[dict[str, Any]] = field(default_factory=list)

    def impression(
        self, auction: str, impression_id: str, ts: int, campaign: str = "c1", cost: float = 1.0
    ) -> None:
        self.impressions.append(
            {
                "auction_id": auction,
                "impression_id": impression_id,
                "campaign": campaign,
                "cost": cost,
                "ts_ms": ts,
                "partition": partition_of(auction),
            }
        )

    def click(self, auction: str, click_id: str, ts: int) -> None:
        self.clicks.append(
            {
                "auction_id": auction,
                "click_id": click_id,
                "ts_ms": ts,
                "partition": partition_of(auction),
            }
        )

    def reference_impressions(self) -> list[Impression]:
        return [
            Impression(r["auction_id"], r["impression_id"], r["ts_ms"], r["campaign"], r["cost"])
            for r in self.impressions
        ]

    def reference_clicks(self) -> list[Click]:
        return [Click(r["auction_id"], r["click_id"], r["ts_ms"]) for r in self.clicks]

    def stream_times(self) -> dict[int, int]:
        times: dict[int, int] = {}
        for row in (*self.impressions, *self.clicks):
            times[row["partition"]] = max(times.get(row["partition"], row["ts_ms"]), row["ts_ms"])
        return times

    def decided(self, window: JoinWindow) -> set[str]:
        """Click ids whose outcome is final: stream time > ts + before + grace."""
        times = self.stream_times()
        return {
            c["click_id"]
            for c in self.clicks
            if times[c["partition"]] > c["ts_ms"] + window.before + window.grace
        }


def random_events(seed: int, window: JoinWindow, auctions: int = 12, hours: int = 3) -> Events:
    """Tricky events: ties, clicks at and beyond the window's edges, duplicates, orphans."""
    rng = random.Random(seed)
    events = Events()
    span = max(window.before + window.after, 1)

    def uid(prefix: str, n: int) -> str:
        # a random part first, so id order is not creation order (tie-breaks matter)
        return f"{prefix}{rng.choice('abcxyz')}{rng.randint(0, 9)}-{seed}-{n}"

    n_imp = n_click = 0
    for a in range(auctions):
        auction = f"a-{seed}-{a}"
        start = (
            BASE_TS + rng.randrange(hours) * HOUR + rng.randrange(max(HOUR - 4 * span, HOUR // 2))
        )
        kind = rng.choice(["one", "one", "many", "many", "orphan"])
        imp_times: list[int] = []
        if kind != "orphan":
            for _ in range(1 if kind == "one" else rng.randint(2, 4)):
                ts = start + rng.choice([0, 0, 1, window.after // 2, window.after, span, 2 * span])
                imp_times.append(ts)
                n_imp += 1
                events.impression(
                    auction,
                    uid("i", n_imp),
                    ts,
                    rng.choice(["camp-a", "camp-b", "camp-c"]),
                    round(rng.uniform(0.05, 2.0), 2),
                )
        anchors = imp_times or [start]
        for _ in range(rng.randint(0, 6)):
            anchor = rng.choice(anchors)
            delta = rng.choice(
                [
                    -window.before - 1,
                    -window.before,
                    -(window.before // 2),
                    0,
                    0,
                    1,
                    window.after // 2,
                    window.after,
                    window.after + 1,
                    rng.randint(-2 * window.before - 10, 2 * window.after + 10),
                ]
            )
            n_click += 1
            events.click(auction, uid("k", n_click), anchor + delta)
            if rng.random() < 0.2:  # a second click at the very same time
                n_click += 1
                events.click(auction, uid("k", n_click), anchor + delta)
    return events


def simulate_stream(events: Events, window: JoinWindow) -> list[ClickOutcome]:
    """What the stream emits, per partition, feeding its state machine in event-time order
    and then, as the real stream does at the end of its input, reporting both inputs idle."""
    by_partition: dict[int, list[tuple[int, int, Impression | Click]]] = defaultdict(list)
    for imp in events.impressions:
        record = Impression(
            imp["auction_id"], imp["impression_id"], imp["ts_ms"], imp["campaign"], imp["cost"]
        )
        by_partition[imp["partition"]].append((imp["ts_ms"], 0, record))
    for c in events.clicks:
        by_partition[c["partition"]].append(
            (c["ts_ms"], 1, Click(c["auction_id"], c["click_id"], c["ts_ms"]))
        )
    emitted: list[ClickOutcome] = []
    for partition in sorted(by_partition):
        task = TaskAttribution(window)
        for _, kind, record in sorted(by_partition[partition], key=lambda e: e[:2]):
            if kind == 0:
                out = task.on_impression(record)  # type: ignore[arg-type]
            else:
                out = task.on_click(record)  # type: ignore[arg-type]
            for item in out:
                if isinstance(item, Late):
                    raise AssertionError(f"simulated stream saw a late record: {item}")
                emitted.append(item)
        # the end of the input: both inputs caught up and silent, so both are idle
        # and decision time is the partition's largest event time
        for side in ("left", "right"):
            for item in task.set_idle(side, True):
                assert isinstance(item, ClickOutcome), item
                emitted.append(item)
    return emitted


def outcome_rows(outcomes: Iterable[ClickOutcome]) -> list[dict[str, Any]]:
    """Archive outcome rows, from exactly the JSON the stream writes."""
    rows = []
    for outcome in outcomes:
        doc = json.loads(encode_outcome(outcome))
        doc["source_topic"] = f"{doc['outcome']}-clicks"
        doc["partition"] = partition_of(doc["auction_id"])
        rows.append(doc)
    return rows


# -- the archive ----------------------------------------------------------------------------


def _hour_dir(ts: int) -> str:
    moment = datetime.fromtimestamp(ts / 1000, tz=UTC)
    return f"date={moment:%Y-%m-%d}/hour={moment:%H}"


def write_dataset(
    root: Path,
    name: str,
    rows: list[dict[str, Any]],
    schema: Any,
    *,
    topic: str | None = None,
    ts_field: str = "ts_ms",
) -> list[Path]:
    """Write *rows* as the contract says: per event hour and partition, offsets in order."""
    offsets: dict[tuple[str, int], int] = defaultdict(int)
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        source = row.get("source_topic") or topic or name
        part = row["partition"]
        row = {**row, "offset": offsets[(source, part)]}
        offsets[(source, part)] += 1
        groups[(_hour_dir(row[ts_field]), source, part)].append(row)
    written = []
    for (hour_dir, source, part), group in sorted(groups.items()):
        directory = root / name / hour_dir
        directory.mkdir(parents=True, exist_ok=True)
        first, last = group[0]["offset"], group[-1]["offset"]
        path = directory / f"{source}+{part}+{first}+{last}.parquet"
        table = pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in group], schema)
        pq.write_table(table, path)
        written.append(path)
    return written


def write_archive(
    root: Path,
    events: Events,
    outcomes: list[dict[str, Any]] | None,
) -> Path:
    """An archive of *events* and stream *outcomes* (``None``: no outcomes directory)."""
    root.mkdir(parents=True, exist_ok=True)
    write_dataset(root, "impressions", events.impressions, IMPRESSION_SCHEMA)
    write_dataset(root, "clicks", events.clicks, CLICK_SCHEMA)
    if outcomes is not None:
        write_dataset(root, "outcomes", outcomes, OUTCOME_SCHEMA, ts_field="click_ts_ms")
    return root
