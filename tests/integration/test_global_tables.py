"""Global tables with streamjoin's TableManager: every worker applies every write of
every partition, continuously, whoever wrote it, and catches up after kill -9."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from kafka_util import create_topic, run, wait_until

from streamjoin.dev.process import WorkerProcess

pytestmark = pytest.mark.broker



async def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for key, value in records:
            await producer.send(topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


_ASSIGNED = re.compile(
    r"streamjoin: assigned generation (\d+): .*target moves 0 .*warm-ups 0, held back 0"
)
_ANY_ASSIGNED = re.compile(r"streamjoin: assigned generation (\d+):")


def _group_settled(procs: dict[str, WorkerProcess]) -> bool:
    """Has the leader's latest assignment nothing more to move, and has every
    worker taken it (from the workers' logs)?"""
    logs = {name: proc.log_text() for name, proc in procs.items()}
    latest = max((int(g) for t in logs.values() for g in _ANY_ASSIGNED.findall(t)), default=None)
    if latest is None:
        return False
    final = {int(g) for t in logs.values() for g in _ASSIGNED.findall(t)}
    done = f"streamjoin: rebalance generation {latest}:"
    return latest in final and all(done in t for t in logs.values())


def _held(datadir: Path) -> set[str]:
    path = datadir / "global.json"
    try:
        return set(json.loads(path.read_text()))
    except (OSError, ValueError):
        return set()


def test_every_worker_holds_every_write_of_a_global_table(workers: Any, tmp_path: Path) -> None:
    app_id = workers.app_id
    run(create_topic(workers.broker.bootstrap, f"{app_id}-writes", 4))

    def spawn(name: str) -> WorkerProcess:
        return workers.spawn(name, app="apps.globals:app")

    names = ["w1", "w2", "w3"]
    procs = {name: spawn(name) for name in names}
    for worker in procs.values():
        worker.wait_for_log(r"Worker\]: Ready", timeout=120)
    # each worker's agent writes its share of these (the writes topic is partitioned)
    by_agents = [f"a{n}" for n in range(300)]
    writes = f"{app_id}-writes"
    run(_produce(workers.broker.bootstrap, writes, [(k.encode(), k.encode()) for k in by_agents]))
    # and a producer writes straight to the changelog
    direct = [f"d{n}" for n in range(30)]
    run(
        _produce(
            workers.broker.bootstrap,
            f"{app_id}-gt-changelog",
            [(json.dumps(k).encode(), json.dumps(k).encode()) for k in direct],
        )
    )
    written_at = time.monotonic()
    want = set(by_agents) | set(direct)

    def everyone_has(keys: set[str], on: list[str]) -> bool:
        return all(_held(tmp_path / n) >= keys for n in on)

    wait_until(lambda: everyone_has(want, names), 60, "every worker holding every key", 0.2)
    # agents take a moment to process; what matters: nobody waits for a rebalance
    assert time.monotonic() - written_at < 30
    # kill -9 one worker, write more while it is down, restart it
    procs["w2"].kill()
    more = [f"b{n}" for n in range(60)]
    run(_produce(workers.broker.bootstrap, writes, [(k.encode(), k.encode()) for k in more]))
    want |= set(more)
    wait_until(lambda: everyone_has(want, ["w1", "w3"]), 60, "the survivors holding every key", 0.2)
    procs["w2"].start()
    wait_until(lambda: everyone_has(want, names), 90, "the restarted worker catching up", 0.3)
    # the writes' agents run where the group put them: with cooperative
    # rebalancing a task moves in a follow-up rebalance, so wait until the
    # group moves nothing more (what is measured below is the global table)
    wait_until(lambda: _group_settled(procs), 90, "the group settled after the restart", 0.3)
    # a write by one agent reaches the other workers within about a second
    last = [f"c{n}" for n in range(8)]
    run(_produce(workers.broker.bootstrap, writes, [(k.encode(), k.encode()) for k in last]))
    start = time.monotonic()
    want |= set(last)
    wait_until(lambda: everyone_has(want, names), 30, "the last writes everywhere", 0.1)
    took = time.monotonic() - start
    # agent processing + changelog send + the followers' fetch wait (0.5 s) + 0.2 s report
    assert took < 3, f"the last writes took {took:.1f}s to reach every worker"
    # the lag shown per global partition (changelog_lags) comes down to 0 everywhere
    changelog = f"{app_id}-gt-changelog"

    def caught_up(name: str) -> bool:
        try:
            rows = json.loads((tmp_path / name / "lags.json").read_text())
        except (OSError, ValueError):
            return False
        lags = {p: lag for t, p, lag in rows if t == changelog}
        return sorted(lags) == [0, 1, 2, 3] and set(lags.values()) == {0}

    wait_until(lambda: all(caught_up(n) for n in names), 10, "global lags of 0", 0.2)
