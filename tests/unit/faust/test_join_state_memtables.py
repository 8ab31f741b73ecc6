"""A join's state flushes its RocksDB memtables at 16 MiB, not faust's 64 MiB.

Each task's state database keeps what it was written in a memtable until the
memtable is full (RocksDB's write buffer, up to three per database). At
faust's 64 MiB a worker's memory grew by 4 x 64 MiB over a 4.9M-record
backlog, reaching its level only three quarters through (docs/benchmarks.rst,
"A memtable of 16 MiB"). Here a real database of a join's state table is
written 40 MiB: it has flushed to a table file, and its memtables hold at most
what the smaller buffers allow.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import streamjoin
from streamjoin.ads.policy import AdAttribution
from streamjoin.faust.join.declare import STATE_WRITE_BUFFER_BYTES
from streamjoin.join.window import JoinWindow

WRITTEN = 40 * 1024**2
VALUE = b"v" * 10_000


def _state_db(tmp_path: Path) -> Any:  # Any: a rocksdict.Rdict
    app = streamjoin.App("memtable-test", datadir=str(tmp_path), web_enabled=False)
    policy = AdAttribution(JoinWindow(before=0, after=60_000, grace=1_000))
    app.topic("imps", partitions=1)
    app.topic("clicks", partitions=1)
    app.join("imps", "clicks", policy=policy, name="j")
    store = app.tables["j-state"].data
    return store._db_for_partition(0)


def test_the_state_flushes_at_16_mib_and_its_memtables_stay_below_three_of_them(
    tmp_path: Path,
) -> None:
    assert STATE_WRITE_BUFFER_BYTES == 16 * 1024**2
    db = _state_db(tmp_path)
    for i in range(WRITTEN // len(VALUE)):
        db[b"k%08d" % i] = VALUE
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and db.property_int_value("rocksdb.num-immutable-mem-table"):
        time.sleep(0.05)  # flushes run on RocksDB's own threads
    # at faust's 64 MiB nothing of the 40 MiB would be in a table file yet
    assert db.property_int_value("rocksdb.total-sst-files-size") > 0
    assert db.property_int_value("rocksdb.cur-size-all-mem-tables") < 3 * STATE_WRITE_BUFFER_BYTES
    db.close()
