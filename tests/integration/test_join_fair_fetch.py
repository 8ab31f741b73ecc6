"""A task's records never wait behind another task's backlog (issue 38).

One worker of a windowed join with two tasks and a small ``batch_max``: task 0
starts on a backlog of 60,000 records (1,200 batches; one fetch of it alone
brings thousands of records), task 1 gets one record while task 0 is still
reading it. Task 1's record must be applied while task 0 works on at most a
fraction of one fetch of its backlog (the time a fetch of task 1 takes), not
after task 0 has worked through what it fetched. Before the intake held back
only the task with a full inbox (the fetch waited whenever the join's whole
buffer was full), task 1's record was applied only once task 0 had read all
60,000. How long that takes against the worker's batches is measured by
``python -m benchmarks.join`` (part 2b, a kill -9 under load).
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kafka_util import create_topic, produce, run, wait_until

from streamjoin.dev.broker import EmbeddedBroker, free_port
from streamjoin.dev.process import WorkerProcess

APPS_DIR = Path(__file__).resolve().parent  # apps/ lives beside the tests

pytestmark = pytest.mark.broker

APP_ID = "sj-fair-fetch"
BACKLOG = 60_000
BATCH_MAX = 50
#: task 0's records the worker may apply between task 1's record's append and
#: its batch: what it does while a fetch of task 1 is under way (the broker
#: holds a fetch up to 50 ms), far less than one fetch of task 0's backlog
MAX_MEANWHILE = 5_000


def _join(port: int) -> dict[str, Any] | None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/streamjoin/joins/", timeout=2) as response:
            return json.loads(response.read())["paid"]  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError):
        return None


def _position(join: dict[str, Any] | None, task: int) -> int:
    if join is None:
        return -1
    return int((join["tasks"].get(str(task), {}).get("position", {}) or {}).get("left") or -1)


def test_a_task_without_a_backlog_is_not_held_up_by_one_with_a_backlog(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    for topic in ("orders", "payments"):
        run(create_topic(broker.bootstrap, f"{APP_ID}-{topic}", 2))
    orders = f"{APP_ID}-orders"
    backlog = ((f"o{i}".encode(), b"order", 0) for i in range(BACKLOG))
    run(produce(broker.bootstrap, orders, backlog))
    port = free_port()
    worker = WorkerProcess(
        "apps.windowed:app",
        broker.url,
        tmp_path / "w",
        tmp_path / "w.log",
        env={"SJ_TEST_APP_ID": APP_ID, "SJ_TEST_BATCH_MAX": str(BATCH_MAX)},
        extra_args=["--with-web", "--web-port", str(port), "--web-bind", "127.0.0.1"],
        cwd=APPS_DIR,
    ).start()
    try:
        wait_until(lambda: _position(_join(port), 0) > 0, 90, "task 0 to read its backlog")
        run(produce(broker.bootstrap, orders, [(b"fresh", b"order", 1)]))
        at_append = _position(_join(port), 0)
        started = time.monotonic()
        applied = wait_until(
            lambda: (j := _join(port)) is not None and _position(j, 1) >= 1 and j,
            60,
            "task 1 to apply its record",
            interval=0.02,
        )
        took = time.monotonic() - started
        at_apply = _position(applied, 0)
        holds = applied["stats"]["holds"]
    finally:
        worker.kill()
    # the backlog was still being read: the test did compare the two tasks
    assert 0 < at_append <= at_apply < BACKLOG, (at_append, at_apply)
    assert at_apply - at_append <= MAX_MEANWHILE, (at_append, at_apply, took)
    print(f"task 0 applied {at_apply - at_append} records meanwhile, {took:.3f} s")
    assert holds >= 1  # task 0 was held back
