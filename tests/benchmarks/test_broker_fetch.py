"""The broker-fetch probe's report says which read brought the kept partition's records."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.broker_fetch import _report  # noqa: E402


def test_the_report_names_the_read_that_brought_partition_1() -> None:
    line = _report(256 * 1024, 1024 * 1024, [(5_070, 0), (0, 0), (1_326, 20)])
    assert "per partition 256 KiB, per response 1,024 KiB" in line
    assert "records per read: 5,070/0, 1,326/20;" in line  # empty reads left out
    assert "partition 1's records came in read 3" in line
    assert line.endswith("largest read of partition 0: 5,070")


def test_the_report_says_when_partition_1_never_came() -> None:
    assert "came never" in _report(1024 * 1024, 52_428_800, [(25_116, 0), (25_116, 0)])
