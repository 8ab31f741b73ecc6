"""A worker's aiokafka consumer fetches as the member's rack (``client_rack``, KIP-392).

Real objects throughout: a streamjoin.App (or a plain faust app), its
transport, faust's consumer and the consumer thread streamjoin subclasses; the
thread builds the real ``aiokafka.AIOKafkaConsumer`` it would start, and the
test reads the rack that consumer hands its fetcher at ``start()``
(``AIOKafkaConsumer._client_rack``, aiokafka 0.14.0). The running worker is
checked in ``tests/integration/test_client_rack.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faust
import pytest
from aiokafka import AIOKafkaConsumer

import streamjoin
from streamjoin.faust.kafka.transport import member_rack
from streamjoin.membership.settings import MemberSettings

BROKER = "kafka://127.0.0.1:9092"


async def _rack_of(app: Any) -> str | None:
    """The rack of the aiokafka consumer *app*'s consumer thread would start,
    built as faust builds it."""
    thread = app.consumer._thread
    try:
        consumer = thread._create_worker_consumer(app.transport)
        assert isinstance(consumer, AIOKafkaConsumer)
        try:
            rack: str | None = consumer._client_rack
            return rack
        finally:
            await consumer.stop()
    finally:
        thread.thread_loop.close()  # the thread's own loop: never started here


@pytest.fixture(autouse=True)
def _no_member_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMJOIN_RACK", raising=False)
    monkeypatch.delenv("STREAMJOIN_COOPERATIVE", raising=False)


def _app(tmp_path: Path, name: str, *, rack: str | None, cooperative: bool) -> streamjoin.App:
    app = streamjoin.App(name, broker=BROKER, datadir=str(tmp_path), cooperative=cooperative)
    # as streamjoin worker sets it from --rack / STREAMJOIN_RACK (streamjoin.worker.run)
    app.conf.streamjoin_member = MemberSettings(rack=rack)
    return app


@pytest.mark.parametrize("cooperative", [True, False])
async def test_the_worker_consumer_gets_the_members_rack(tmp_path: Path, cooperative: bool) -> None:
    app = _app(tmp_path, f"sj-rack-{cooperative}", rack="zone-a", cooperative=cooperative)
    assert app.assignor.settings.rack == "zone-a"  # what the leader hears
    assert await _rack_of(app) == "zone-a"  # what the brokers hear on every fetch


@pytest.mark.parametrize("cooperative", [True, False])
async def test_a_worker_without_rack_passes_none(tmp_path: Path, cooperative: bool) -> None:
    app = _app(tmp_path, f"sj-norack-{cooperative}", rack=None, cooperative=cooperative)
    assert member_rack(app) is None
    assert await _rack_of(app) is None  # aiokafka's default: fetch from the leader


async def test_a_plain_faust_app_with_streamjoins_assignor_reads_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMJOIN_RACK", "zone-b")
    app = faust.App(
        "sj-rack-plain",
        broker="streamjoin-kafka://127.0.0.1:9092",
        datadir=str(tmp_path),
        PartitionAssignor="streamjoin:PartitionAssignor",
    )
    assert await _rack_of(app) == "zone-b"


async def test_a_plain_faust_app_with_faust_assignor_has_no_member_rack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMJOIN_RACK", "zone-b")
    app = faust.App(
        "sj-rack-faust", broker="streamjoin-kafka://127.0.0.1:9092", datadir=str(tmp_path)
    )
    assert await _rack_of(app) is None
