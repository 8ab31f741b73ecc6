"""Settling: waiting until the stream has joined and archived every event.

The expectation comes from the generator's record file (``events.jsonl``):
every well-formed input must reach the archive, and every click that its
task's decision time at the end of the input decides
(:meth:`~streamjoin.join.window.JoinWindow.is_decided`, the rule the stream
and Spark share) must have its outcome archived, unless the stream reported
the click late (the archive's ``late`` dataset names it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from streamjoin.ads.demo.state import DemoState, say
from streamjoin.join.window import JoinWindow

__all__ = [
    "archived_inputs",
    "archived_late",
    "archived_outcomes",
    "decidable_clicks",
    "read_jsonl",
    "settle",
]


def settle(
    events: Path,
    archive: Path,
    window: JoinWindow,
    state: DemoState,
    sample: Callable[[], None],
    timeout: float = 240.0,
) -> None:
    """Wait until every input is archived and every decidable click has its
    outcome in the archive (computed from the generator's record file).

    Calls ``sample()`` on every round. Gives up, saying so, after ``timeout``
    seconds, or once all inputs are archived and no outcome came in 30 s.
    """
    rows = read_jsonl(events)
    inputs = sum(1 for r in rows if r.get("malformed") is None)
    decidable = decidable_clicks(rows, window)
    click_at = {
        (r["topic"], int(r["partition"]), int(r["offset"])): json.loads(r["value"])["click_id"]
        for r in rows
        if r.get("malformed") is None and "click_id" in r["value"]
    }
    deadline = time.monotonic() + timeout
    last_view = 0.0
    progress: tuple[int, int] | None = None
    progress_at = time.monotonic()
    while time.monotonic() < deadline:
        sample()
        late = {click_at[s] for s in archived_late(archive) if s in click_at}
        expected = decidable - late
        archived = archived_inputs(archive)
        outcomes = archived_outcomes(archive)
        if (archived, len(outcomes)) != progress:
            progress, progress_at = (archived, len(outcomes)), time.monotonic()
        elif archived >= inputs and time.monotonic() - progress_at > 30:
            missing = len(expected - outcomes)
            say(
                f"[{state.now():6.1f}s] {missing} outcomes did not come in 30 s "
                "(late records go to the dead-letter topic); reconciling what there is"
            )
            return
        if archived >= inputs and outcomes >= expected:
            say(
                f"[{state.now():6.1f}s] settled: {archived:,} events and "
                f"{len(outcomes):,} click outcomes archived"
            )
            return
        if time.monotonic() - last_view >= 5:
            late_note = f", {len(late)} clicks reported late" if late else ""
            say(
                f"[{state.now():6.1f}s] settling: {archived:,}/{inputs:,} events, "
                f"{len(outcomes & expected):,}/{len(expected):,} outcomes archived{late_note}"
            )
            last_view = time.monotonic()
        time.sleep(2)
    say("warning: the pipeline did not settle within the time limit; reporting what there is")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON rows of a JSON-lines file (none when it does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _parquet_files(root: Path) -> Iterator[Path]:
    if root.exists():
        yield from sorted(root.rglob("*.parquet"))


def archived_outcomes(archive: Path) -> set[str]:
    """The click ids of every outcome in the archive."""
    import pyarrow.parquet as pq

    found: set[str] = set()
    for path in _parquet_files(archive / "outcomes"):
        found.update(pq.read_table(path, columns=["click_id"]).column(0).to_pylist())
    return found


def archived_late(archive: Path) -> set[tuple[str, int, int]]:
    """(topic, partition, offset) of every input record the stream reported late."""
    import pyarrow.parquet as pq

    found: set[tuple[str, int, int]] = set()
    for path in _parquet_files(archive / "late"):
        table = pq.read_table(path, columns=["input_topic", "input_partition", "input_offset"])
        found.update(zip(*(table.column(i).to_pylist() for i in range(3)), strict=True))
    return found


def decidable_clicks(rows: list[dict[str, Any]], window: JoinWindow) -> set[str]:
    """Clicks whose outcome the stream emits by the end of the input: their task's
    decision time then (both inputs idle: the largest event time on their
    partition) decides them (:meth:`JoinWindow.is_decided`, the rule the stream
    and Spark use)."""
    final: dict[int, int] = {}
    clicks: list[tuple[str, int, int]] = []
    for row in rows:
        if row.get("malformed") is not None:
            continue
        value = json.loads(row["value"])
        partition = int(row["partition"])
        final[partition] = max(final.get(partition, 0), int(value["ts_ms"]))
        if "click_id" in value:
            clicks.append((value["click_id"], partition, int(value["ts_ms"])))
    return {cid for cid, p, ts in clicks if window.is_decided(ts, final[p])}


def archived_inputs(archive: Path) -> int:
    """The number of impressions and clicks in the archive."""
    import pyarrow.parquet as pq

    return sum(
        pq.ParquetFile(path).metadata.num_rows
        for dataset in ("impressions", "clicks")
        for path in _parquet_files(archive / dataset)
    )
