"""Pure restore rules: start offset, completion, beyond-end, task gating, progress lines."""

from __future__ import annotations

import io
import logging

from streamjoin.restore.plan import (
    PartitionProgress,
    is_beyond_end,
    is_caught_up,
    ready_partitions,
    restore_target,
    start_offset,
)
from streamjoin.restore.progress import (
    ProgressReporter,
    TableProgress,
    format_bar,
    format_eta,
    format_progress,
)


def test_start_offset_follows_the_persisted_offset() -> None:
    assert start_offset(None) is None
    assert start_offset(-1) is None
    assert start_offset(0) == 1
    assert start_offset(41) == 42


def test_no_completion_without_a_fetch_response() -> None:
    # ListOffsets alone (here: 0, an empty-looking partition) never completes a restore
    assert restore_target(None, 0) is None
    assert not is_caught_up(0, None, 0)


def test_completion_uses_the_larger_of_fetch_highwater_and_end_offset() -> None:
    # the embedded broker's ListOffsets lags (answers 1 for 5 records in one batch)
    assert not is_caught_up(1, 5, 1)
    assert is_caught_up(5, 5, 1)
    # and a lagging fetch highwater cannot end it early either
    assert not is_caught_up(5, 5, 7)
    assert is_caught_up(7, 5, 7)


def test_trailing_control_records_do_not_hang() -> None:
    # the position moves past a trailing transaction marker to the highwater
    assert is_caught_up(11, 11, 11)


def test_beyond_end_only_when_position_passes_the_fetch_highwater() -> None:
    assert is_beyond_end(21, 5)
    assert not is_beyond_end(5, 5)
    assert not is_beyond_end(21, None)
    assert not is_beyond_end(None, 5)


def test_task_gate_waits_for_every_changelog_of_the_task() -> None:
    assert ready_partitions([0, 1, 2], pending_changelogs=[1], global_pending=False) == {0, 2}
    assert ready_partitions([0, 1, 2], pending_changelogs=[], global_pending=False) == {0, 1, 2}
    assert ready_partitions([0, 1, 2], pending_changelogs=[], global_pending=True) == set()


def test_partition_progress_totals() -> None:
    part = PartitionProgress("tp", first_offset=10, position=30, target=110, applied=20)
    assert part.remaining() == 80
    assert part.total() == 100
    unknown = PartitionProgress("tp", first_offset=0, position=0)
    assert unknown.remaining() == 0


def test_progress_line_and_bar() -> None:
    p = TableProgress("latest", restored=500, total=1000, elapsed=2.0)
    assert p.rate == 250
    assert p.eta == 2.0
    line = format_progress(p)
    assert line == "restoring table latest: 500/1000 records (50.0%), 250 records/s, ETA 2s"
    assert "[###############...............]" in format_bar(p)
    assert format_eta(None) == "?"
    assert format_eta(65) == "1m05s"


def test_reporter_logs_once_per_interval_per_table() -> None:
    now = [0.0]
    stream = io.StringIO()
    logger = logging.getLogger("test.restore.progress")
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Collect()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        reporter = ProgressReporter(logger, interval=1.0, stream=stream, clock=lambda: now[0])
        snap = [TableProgress("a", 1, 10, 1.0), TableProgress("b", 2, 10, 1.0)]
        reporter.maybe_report(snap)
        now[0] = 0.5
        reporter.maybe_report(snap)
        now[0] = 1.0
        reporter.maybe_report(snap)
        reporter.maybe_report(snap, force=True)
    finally:
        logger.removeHandler(handler)
    assert len(records) == 6
    assert stream.getvalue() == ""  # not a terminal: no progress bar
