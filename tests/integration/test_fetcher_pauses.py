"""The worker's fetcher fetches only what faust delivers (issue 38).

faust pauses a partition by no longer delivering it: the inputs of a task
whose tables are being restored, and every changelog partition assigned to
the worker (streamjoin restores and tails changelogs with a consumer of its
own). aiokafka's fetcher used to fetch them all the same; with one broker
their never-consumed responses crowded the fetch responses and held back
every fetch for 0.1 s, so a task kept through a takeover waited 0.3-0.6 s
for its next records (``python -m benchmarks.join``, part 2b). Here one
worker of a windowed join restores 40,000 changelog records after its data
directory was lost: the fetcher must hold the inputs while the restore runs,
fetch them again once it ended (the join applies a new record), and then
hold every changelog partition and nothing else. (A new assignment reaches
the fetcher before faust pauses what it adds, a few milliseconds later: the
fetcher first looks up the added partitions' offsets, which takes longer.)
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from kafka_util import create_topic, produce, run, wait_until
from test_join_fair_fetch import _join, _position

from streamjoin.dev.broker import EmbeddedBroker, free_port
from streamjoin.dev.process import WorkerProcess

APPS_DIR = Path(__file__).resolve().parent  # apps/ lives beside the tests

pytestmark = pytest.mark.broker

APP_ID = "sj-fetch-pauses"
ORDERS = 40_000
HOLDS = re.compile(r"fetcher holds (\[.*?\]) of (\[.*?\])")


def _slowest(port: int) -> int:
    """The lower of the join's two tasks' positions."""
    join = _join(port)
    return min(_position(join, 0), _position(join, 1))


def _holds(worker: WorkerProcess) -> list[tuple[set[str], set[str]]]:
    """Every (held, assigned) the worker logged since it started."""
    return [
        (set(json.loads(held)), set(json.loads(assigned)))
        for held, assigned in HOLDS.findall(worker.log_text())
    ]


def test_the_fetcher_holds_what_faust_paused_and_fetches_it_again_after_the_restore(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    for topic in ("orders", "payments"):
        run(create_topic(broker.bootstrap, f"{APP_ID}-{topic}", 2))
    orders = f"{APP_ID}-orders"
    inputs = {f"{APP_ID}-{t}:{p}" for t in ("orders", "payments") for p in (0, 1)}
    run(produce(broker.bootstrap, orders, ((f"o{i}".encode(), b"o", i % 2) for i in range(ORDERS))))
    port = free_port()
    worker = WorkerProcess(
        "apps.fetch_pauses:app",
        broker.url,
        tmp_path / "w",
        tmp_path / "w.log",
        env={"SJ_TEST_APP_ID": APP_ID},
        extra_args=["--with-web", "--web-port", str(port), "--web-bind", "127.0.0.1"],
        cwd=APPS_DIR,
    )
    try:
        # the orders wait in the join's state (no payment comes): a changelog to restore
        worker.start()
        last = ORDERS // 2 - 1
        wait_until(
            lambda: min(_position(j := _join(port), 0), _position(j, 1)) >= last, 120, "the backlog"
        )
        assert worker.stop(timeout=30) == 0
        shutil.rmtree(tmp_path / "w")  # the state is lost: the worker restores it

        worker.start().wait_for_log(r"Worker\]: Ready", timeout=90)
        run(produce(broker.bootstrap, orders, [(b"fresh", b"o", 0)]))
        wait_until(lambda: _position(_join(port), 0) > last, 60, "the new record applied")
        holds = _holds(worker)
    finally:
        worker.kill()
    assert holds, "the worker logged no fetcher state"
    changelogs = {tp for _, assigned in holds for tp in assigned if "-changelog:" in tp}
    assert len(changelogs) == 2, holds[-1]
    # while the restore ran, the inputs were held in the fetcher too
    assert any(inputs <= held for held, _ in holds), holds
    # once it ended, the inputs are fetched again; a changelog never is
    held, assigned = holds[-1]
    assert assigned >= inputs | changelogs
    assert held == changelogs, held
