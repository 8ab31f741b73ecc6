"""The embedded broker starts on a free port, speaks Kafka, and stops by process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from streamjoin.dev.broker import EmbeddedBroker, wait_for_port

pytestmark = pytest.mark.broker

CLI = "from streamjoin.cli import main; main()"


def test_broker_answers_metadata(broker: EmbeddedBroker) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    async def topics() -> list[str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            return list(await admin.list_topics())
        finally:
            await admin.close()

    import asyncio

    assert isinstance(asyncio.run(asyncio.wait_for(topics(), 20)), list)


def test_broker_command_prints_address_and_stops_on_interrupt() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "broker", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        host, _, port = line.partition(":")
        assert host == "127.0.0.1"
        assert wait_for_port(host, int(port), 10)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=15) == 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and wait_for_port(host, int(port), 0.1):
            time.sleep(0.1)
        assert not wait_for_port(host, int(port), 0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_broker_on_a_busy_port_fails_with_one_line(broker: EmbeddedBroker) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CLI, "broker", "--port", str(broker.port)],
        capture_output=True,
        text=True,
        timeout=30,
        start_new_session=True,
    )
    assert result.returncode != 0
    assert result.stdout == ""
    assert "already in use" in result.stderr
    assert "Traceback" not in result.stderr


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_kill_9_of_the_broker_command_takes_the_broker_with_it() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "broker", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    broker_pid = None
    try:
        assert proc.stdout is not None and proc.stderr is not None
        host, _, port = proc.stdout.readline().decode().strip().partition(":")
        assert wait_for_port(host, int(port), 10)
        said = proc.stderr.readline().decode()
        broker_pid = int(said.split("pid ", 1)[1].split()[0])
        assert broker_pid != proc.pid and _alive(broker_pid)
        os.killpg(proc.pid, signal.SIGKILL)  # the command's group; the broker has its own
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(broker_pid):
            time.sleep(0.1)
        assert not _alive(broker_pid), "the broker outlived its command"
        # A killed multi-threaded process shows as a zombie as soon as its main thread is
        # gone, while its other threads may still hold the listening socket for a moment.
        while time.monotonic() < deadline and wait_for_port(host, int(port), 0.1):
            time.sleep(0.1)
        assert not wait_for_port(host, int(port), 0.2), "the broker's port outlived it"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        if broker_pid is not None and _alive(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _join_seconds(bootstrap: str, topic: str, group: str, session_ms: int) -> float:
    """Seconds from a consumer's start to its first assignment, alone in a new group."""
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import ConsumerRebalanceListener

    async def measure() -> float:
        assigned = asyncio.get_running_loop().create_future()

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            def on_partitions_assigned(self, partitions: Any) -> None:
                if not assigned.done():
                    assigned.set_result(time.monotonic())

        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=max(250, session_ms // 4),
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            started = time.monotonic()
            consumer.subscribe([topic], listener=Listener())
            getter = asyncio.ensure_future(consumer.getmany(timeout_ms=100))
            try:
                done = await asyncio.wait_for(assigned, 30)
            finally:
                getter.cancel()
            return done - started
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(measure(), 60))


def test_the_broker_holds_a_join_for_half_the_session_timeout(broker: EmbeddedBroker) -> None:
    """docs/operations.rst, "Rebalances on the embedded broker": the rebalance floor."""
    import asyncio

    from kafka_util import create_topic

    topic = "sj-join-hold"
    asyncio.run(create_topic(broker.bootstrap, topic, 1))
    long_hold = _join_seconds(broker.bootstrap, topic, "sj-join-hold-6s", 6000)
    short_hold = _join_seconds(broker.bootstrap, topic, "sj-join-hold-2s", 2000)
    assert long_hold >= 2.9, f"a 6 s session was held {long_hold:.2f}s, not about 3 s"
    assert short_hold < long_hold - 1.5, (
        f"a 2 s session was held {short_hold:.2f}s against {long_hold:.2f}s for 6 s"
    )
