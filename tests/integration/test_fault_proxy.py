"""The fault proxy in front of the real broker: every connection passes through
it, and cut, cut-after, stall and slow do to a real Kafka client what they say."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kafka_util import create_topic, run

from streamjoin.dev.faults import BrokerBehindProxy, FaultProxy

pytestmark = [pytest.mark.broker]

TOPIC = "fault-proxy"


@pytest.fixture(scope="module")
def behind() -> Iterator[BrokerBehindProxy]:
    with BrokerBehindProxy() as broker:
        run(create_topic(broker.bootstrap, TOPIC, 1))
        yield broker


@pytest.fixture
def proxy(behind: BrokerBehindProxy) -> Iterator[FaultProxy]:
    assert behind.proxy is not None
    yield behind.proxy
    behind.proxy.heal()


async def _send(bootstrap: str, values: list[bytes], **producer: object) -> list[int]:
    """Send *values* one by one, each acknowledged; their offsets."""
    client = AIOKafkaProducer(bootstrap_servers=bootstrap, **producer)  # type: ignore[arg-type]
    await client.start()
    try:
        return [(await client.send_and_wait(TOPIC, v, partition=0)).offset for v in values]
    finally:
        await client.stop()


async def _read_all(bootstrap: str) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        out: list[bytes] = []
        while await consumer.position(tp) < end:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                out.extend(r.value for r in records)
        return out
    finally:
        await consumer.stop()


def test_every_connection_passes_through_the_proxy(
    behind: BrokerBehindProxy, proxy: FaultProxy
) -> None:
    opened = proxy.opened
    run(_send(behind.bootstrap, [b"a"]))
    # bootstrap, then the partition leader the broker advertised: the proxy both times
    assert proxy.opened >= opened + 2
    assert b"a" in run(_read_all(behind.bootstrap))


def test_a_cut_drops_open_connections_and_clients_reconnect(
    behind: BrokerBehindProxy, proxy: FaultProxy
) -> None:
    async def scenario() -> list[int]:
        client = AIOKafkaProducer(bootstrap_servers=behind.bootstrap)
        await client.start()
        try:
            first = await client.send_and_wait(TOPIC, b"before", partition=0)
            opened = proxy.opened
            assert await asyncio.to_thread(proxy.cut) >= 1
            second = await client.send_and_wait(TOPIC, b"after", partition=0)
            assert proxy.opened > opened  # it had to connect again
            return [first.offset, second.offset]
        finally:
            await client.stop()

    first, second = run(scenario())
    assert second > first


def test_a_stall_holds_every_request_until_it_ends(
    behind: BrokerBehindProxy, proxy: FaultProxy
) -> None:
    run(_send(behind.bootstrap, [b"warm"]))
    proxy.stall(2.0)
    started = time.monotonic()
    run(_send(behind.bootstrap, [b"stalled"], request_timeout_ms=20_000))
    assert time.monotonic() - started >= 1.9


def test_a_slow_link_adds_its_latency_to_every_round_trip(
    behind: BrokerBehindProxy, proxy: FaultProxy
) -> None:
    async def round_trips(n: int) -> float:
        client = AIOKafkaProducer(bootstrap_servers=behind.bootstrap)
        await client.start()
        try:
            started = time.monotonic()
            for i in range(n):
                await client.send_and_wait(TOPIC, b"slow%d" % i, partition=0)
            return time.monotonic() - started
        finally:
            await client.stop()

    proxy.slow(latency=0.15)
    # each acknowledged send crosses the proxy twice: request and response
    assert run(round_trips(4)) >= 4 * 2 * 0.15 * 0.9


def _api_versions(address: str) -> tuple[int, bytes]:
    """Send one Kafka ApiVersions request (v0) on a fresh connection; return the
    response's announced size and the bytes that arrived before the connection
    ended or the response was complete."""
    import socket
    import struct

    host, port = address.split(":")
    client_id = b"test"
    header = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header)) + header)
        data = b""
        size = None
        while size is None or len(data) < size + 4:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if size is None and len(data) >= 4:
                size = struct.unpack(">i", data[:4])[0]
    return (-1 if size is None else size), data


def test_cut_after_drops_a_response_midway_and_heal_ends_it(
    behind: BrokerBehindProxy, proxy: FaultProxy
) -> None:
    size, whole = _api_versions(behind.bootstrap)
    assert size > 100 and len(whole) == size + 4
    cuts = proxy.cuts
    request = 18
    proxy.cut_after(request + 40)  # the request passes, then 40 bytes of the answer
    _, cut = _api_versions(behind.bootstrap)
    assert len(cut) == 40 and cut == whole[:40]
    assert proxy.cuts > cuts
    proxy.heal()
    assert _api_versions(behind.bootstrap)[1] == whole


def test_faults_refuse_nonsense_with_the_reason(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="seconds >= 0"):
        proxy.stall(-1)
    with pytest.raises(ValueError, match="byte count"):
        proxy.cut_after(-5)
    with pytest.raises(ValueError, match="latency >= 0"):
        proxy.slow(latency=-0.1)


def test_broker_faults_command_takes_fault_commands_on_stdin() -> None:
    """``streamjoin broker --faults``: a proxy address on stdout, every line on
    stdin a fault, answered on stderr; a stall holds a real client's request."""
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", "from streamjoin.cli import main; main()", "broker", "--faults",
         "--port", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        bootstrap = proc.stdout.readline().decode().strip()
        assert bootstrap.startswith("127.0.0.1:")
        proc.stderr.readline()  # the banner

        def command(line: str) -> str:
            proc.stdin.write(line.encode() + b"\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
            return proc.stderr.readline().decode().strip()  # type: ignore[union-attr]

        run(create_topic(bootstrap, TOPIC, 1))
        assert command("stall 2") == "nothing forwarded for 2.0 s"
        started = time.monotonic()
        run(_send(bootstrap, [b"through the cli"], request_timeout_ms=20_000))
        assert time.monotonic() - started >= 1.5
        assert command("slow oops").startswith("error: 'slow oops':")
        assert command("heal") == "healed: plain forwarding"
        assert "connection(s) opened" in command("status")
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
