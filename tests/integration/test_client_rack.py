"""A ``streamjoin worker`` with a rack fetches as that rack, on the embedded broker.

The worker runs ``tests/integration/apps/counter.py``; its rack comes from
``--rack`` or ``STREAMJOIN_RACK``, with cooperative rebalancing on and off (the
two transports a streamjoin.App uses). The embedded broker is one node with no
rack: it answers the rack-carrying fetches (Fetch v11+) from the leader, so the
worker must still read every partition.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka_util import create_topic, encode, first_processed, produce, run, wait_until

from streamjoin.dev.broker import EmbeddedBroker

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PARTITIONS = 4
RACK_LINE = r"client rack 'zone-1': brokers whose replica.selector.class is rack-aware"


@pytest.mark.parametrize(
    ("given", "cooperative"),
    [("flag", "1"), ("variable", "0")],
    ids=["flag-cooperative", "env-eager"],
)
def test_a_worker_with_a_rack_fetches_as_it_and_reads_every_partition(
    broker: EmbeddedBroker, workers: Any, given: str, cooperative: str
) -> None:
    app_id = workers.app_id
    events = f"{app_id}-events"
    run(create_topic(broker.bootstrap, events, PARTITIONS))
    env = {"STREAMJOIN_COOPERATIVE": cooperative}
    if given == "variable":
        env["STREAMJOIN_RACK"] = "zone-1"
    flags = ("--rack", "zone-1") if given == "flag" else ()
    worker = workers.spawn("w", env=env, extra_args=flags, partitions=PARTITIONS)
    # the consumer the worker started was built with client_rack="zone-1"
    assert len(worker.wait_for_log(RACK_LINE, 90)) == 1
    records = [(encode(f"k{i}"), encode(i), i % PARTITIONS) for i in range(40)]
    run(produce(broker.bootstrap, events, records))

    def partitions_read() -> bool:
        seen = {line["partition"] for line in first_processed(worker.datadir)}
        return seen == set(range(PARTITIONS))

    wait_until(partitions_read, 90, "the worker to read every partition")
    log = worker.log_text()
    # aiokafka warns when the broker's fetches are too old to carry the rack
    assert "client_rack is set to" not in log
    assert ("cooperative rebalancing: on" in log) is (cooperative == "1")
