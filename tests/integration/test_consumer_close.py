"""A consumer stopped while a fetch waits out its retry back-off closes.

aiokafka 0.14's ``Fetcher.close`` lets the ``CancelledError`` of such a fetch
escape ``AIOKafkaConsumer.stop()``, and waits forever for a fetch loop that
swallowed its cancellation while it cancelled that fetch after an assignment
change; in a worker either left the worker hanging after SIGTERM until it was
SIGKILLed (CI, twice). :func:`~streamjoin.faust.kafka.consumer.mend_fetcher_close`
is what a worker installs; the ``aiokafka`` tests pin the upstream faults it
works around (when one fails, aiokafka fixed it and that part of the mend can
go)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kafka_util import create_topic, run

from streamjoin.dev.faults import BrokerBehindProxy
from streamjoin.faust.kafka.consumer import mend_fetcher_close

pytestmark = [pytest.mark.broker]

TOPIC = "consumer-close"
#: long enough that the cut fetch is still in its back-off when the consumer stops
BACKOFF_MS = 5_000


@pytest.fixture(scope="module")
def behind() -> Iterator[BrokerBehindProxy]:
    with BrokerBehindProxy() as broker:
        run(create_topic(broker.bootstrap, TOPIC, 2))
        yield broker
        assert broker.proxy is not None
        broker.proxy.heal()


async def _consumer_in_backoff(behind: BrokerBehindProxy, *, mend: bool) -> AIOKafkaConsumer:
    """A consumer of partition 0 (its fetcher mended if *mend*) whose fetch's
    connection was just cut: that fetch sleeps out its retry back-off."""
    assert behind.proxy is not None
    producer = AIOKafkaProducer(bootstrap_servers=behind.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(TOPIC, b"x", partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=behind.bootstrap,
        enable_auto_commit=False,
        retry_backoff_ms=BACKOFF_MS,
        fetch_max_wait_ms=2_000,  # the next fetch waits on the broker: in flight at the cut
    )
    await consumer.start()
    try:
        if mend:
            assert mend_fetcher_close(consumer)
            assert not mend_fetcher_close(consumer)  # once per fetcher
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        assert await consumer.getmany(timeout_ms=5_000)  # the record: fetching runs
        await asyncio.sleep(0.3)  # the next fetch waits on the broker
        assert await asyncio.to_thread(behind.proxy.cut) >= 1
        await asyncio.sleep(0.5)  # it failed and sleeps out its back-off
        assert any(not task.done() for task in consumer._fetcher._pending_tasks)
    except BaseException:
        await consumer.stop()
        raise
    return consumer


async def _stop_during_backoff(behind: BrokerBehindProxy, *, mend: bool) -> str:
    """Stop a consumer whose fetch sleeps out its back-off: ``"closed"`` or
    ``"CancelledError"`` (what ``stop()`` ended with)."""
    consumer = await _consumer_in_backoff(behind, mend=mend)
    try:
        await asyncio.wait_for(asyncio.shield(consumer.stop()), timeout=BACKOFF_MS / 1000 / 2)
    except asyncio.CancelledError:
        await consumer._client.close()  # what stop() did not get to
        return "CancelledError"
    return "closed"


def test_aiokafka_stop_lets_the_cancelled_fetch_escape(behind: BrokerBehindProxy) -> None:
    assert run(_stop_during_backoff(behind, mend=False)) == "CancelledError"


def test_a_mended_fetcher_closes_with_a_fetch_in_its_back_off(
    behind: BrokerBehindProxy, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="streamjoin.faust.kafka.consumer"):
        assert run(_stop_during_backoff(behind, mend=True)) == "closed"
    # the fault did happen, and was handled
    assert "a fetch cut short in its retry back-off was dropped" in caplog.text


async def _stop_while_the_fetch_loop_cancels_its_fetches(
    behind: BrokerBehindProxy, *, mend: bool
) -> str:
    """The consumer's assignment changes while a fetch sleeps out its back-off;
    the fetch loop cancels that fetch and waits for it, and the consumer is
    stopped right then: ``"closed"`` or ``"hung"``.

    aiokafka's fetch loop suppresses the ``CancelledError`` of that wait, its
    own cancellation included: ``Fetcher.close`` then waits for a loop that
    runs on (seen in a worker stopped while a rebalance completed, as the
    suspected cause of a stop that hung)."""
    consumer = await _consumer_in_backoff(behind, mend=mend)
    fetcher = consumer._fetcher
    sleeping = [task for task in fetcher._pending_tasks if not task.done()]
    consumer.assign([TopicPartition(TOPIC, 1)])  # the old assignment ends
    routine = fetcher._fetch_task
    for _ in range(100):  # until the fetch loop waits for the fetch it cancelled
        if routine._fut_waiter in sleeping:
            break
        await asyncio.sleep(0)
    assert routine._fut_waiter in sleeping
    # the fetcher's close (what stop() calls once the group coordinator closed)
    # in this very step: it cancels the loop before the loop resumes; a
    # watchdog cancels the loop again after 3 s, so that a hung close ends
    watchdog = asyncio.get_running_loop().call_later(3.0, routine.cancel)
    started = time.monotonic()
    with contextlib.suppress(asyncio.CancelledError):  # the other fault (the first tests)
        await fetcher.close()
    watchdog.cancel()
    elapsed = time.monotonic() - started
    consumer._closed = True  # the rest of stop(), by hand
    await consumer._client.close()
    return "closed" if elapsed < 2.5 else "hung"


def test_aiokafka_stop_waits_for_a_fetch_loop_that_swallowed_its_cancellation(
    behind: BrokerBehindProxy,
) -> None:
    assert run(_stop_while_the_fetch_loop_cancels_its_fetches(behind, mend=False)) == "hung"


def test_a_mended_fetcher_closes_while_its_fetch_loop_cancels_its_fetches(
    behind: BrokerBehindProxy,
) -> None:
    assert run(_stop_while_the_fetch_loop_cancels_its_fetches(behind, mend=True)) == "closed"
