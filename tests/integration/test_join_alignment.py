"""A task's two inputs are read in step by time, not one far ahead (issue 38).

A backlog of one task on both inputs of the windowed join, over the same 200
s of event time: large orders and small payments. A fetch asks each
partition for the same bytes, so each fetch of payments covers many times
the event time of a fetch of orders; taken as fetched, the payments ran
minutes ahead of the orders, every one of them held in state until the
orders caught up (on the benchmark's 4.9M-record backlog: ten hours, a
gigabyte of memory). Taken in step, the input ahead waits in the inbox and
its partition is not fetched, so the watermarks stay within about a batch of
each other.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka_util import create_topic, produce, run, wait_until
from windowed_worker import join_page as _join
from windowed_worker import start_windowed_worker

from streamjoin.dev.broker import EmbeddedBroker

pytestmark = pytest.mark.broker

APP_ID = "sj-aligned"
#: 200 s of event time, one record of each input per 20 ms (the generic
#: windowed policy, which the test app runs, is not made for large backlogs)
RECORDS = 10_000
STEP_MS = 20
ORDER = b"order:" + b"x" * 1_994
PAYMENT = b"paid"
#: a batch takes at most BATCH_MAX records of a task, an input's partition is
#: not fetched while 2 x BATCH_MAX of its records wait (8 s of orders)
BATCH_MAX = 200
#: the most the payments' watermark may lead the orders' while both are read:
#: the payments are taken up to the latest order taken (a batch later: 4 s
#: here); a fetch of payments covers over 70 s, and taken as fetched, the
#: payments' lead reached 194 s
MAX_LEAD_S = 20


def _timed(value: bytes, start_ms: int) -> list[tuple[bytes, bytes, int, int]]:
    return [(f"k{i}".encode(), value, 0, start_ms + i * STEP_MS) for i in range(RECORDS)]


def test_an_input_of_small_records_is_not_read_far_ahead_of_the_other(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    for topic in ("orders", "payments"):
        run(create_topic(broker.bootstrap, f"{APP_ID}-{topic}", 2))
    start_ms = int(time.time() * 1000) - 3_600_000
    run(produce(broker.bootstrap, f"{APP_ID}-orders", _timed(ORDER, start_ms)), timeout=120)
    run(produce(broker.bootstrap, f"{APP_ID}-payments", _timed(PAYMENT, start_ms)), timeout=120)
    worker, port = start_windowed_worker(broker, tmp_path, APP_ID, BATCH_MAX)
    leads: list[float] = []

    def done() -> bool:
        join = _join(port)
        task = (join or {}).get("tasks", {}).get("0") or {}
        marks = task.get("watermarks") or {}
        if marks.get("left") is not None and marks.get("right") is not None:
            leads.append((marks["right"] - marks["left"]) / 1000)
        return int((task.get("position") or {}).get("left") or 0) >= RECORDS

    try:
        wait_until(done, 180, "the orders backlog read", interval=0.05)
    finally:
        worker.kill()
    assert len(leads) >= 10, leads  # the run was watched while both were read
    print(f"payments' lead over orders (s): {[round(lead) for lead in leads]}")
    assert max(leads) <= MAX_LEAD_S, max(leads)
