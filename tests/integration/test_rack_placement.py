"""Real workers' leader places actives by their partitions' replica racks (issue 41).

The embedded broker is one node (111) with no rack, so the workers reach it
through :class:`metadata_proxy.MetadataProxy`, which tells every client there
are three brokers, 111 on ``rack-a``, 112 on ``rack-b`` and 113 on ``rack-c``,
and lists each partition's only replica by :data:`RACK_OF` (partition p's on
broker ``111 + RACK_OF[p % 6]``, of every topic alike, so a task's input
partitions and its changelog partition share one rack). The leader stays 111,
so fetches and produces go where they went.

Three ``streamjoin worker`` processes of ``apps/racked.py`` (a co-partitioned
windowed join, its state changelogged) run with ``--rack rack-a``, ``rack-b``
and ``rack-c``. Once the group is stable, the leader's stats
(``cross_rack_tasks``) and every worker's actives show each task on the worker
of its partitions' rack: when all three join at once, and when they join one
by one (with records in the join's state), so that the leader must move tasks
off the first worker to their racks through warm-ups. With
``--rack-traffic-cost 0`` the leader ignores the racks: :data:`RACK_OF` is
chosen so that neither a round-robin nor a contiguous-range placement, in any
member order, is the rack placement, and the leader's stats report cross-rack
tasks.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from kafka_util import create_topic, encode, produce, read_status, run, wait_until
from metadata_proxy import METADATA, MetadataProxy

from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.dev.process import WorkerProcess

pytestmark = [pytest.mark.broker, pytest.mark.slow]

APPS = Path(__file__).resolve().parent
PARTITIONS = 6
#: the embedded broker's node id
REAL_NODE = 111
RACKS = {111: "rack-a", 112: "rack-b", 113: "rack-c"}
#: partition p's only replica is on rack RACK_OF[p % 6] (0: a, 1: b, 2: c): two
#: partitions per rack, and neither p % 3 nor {0, 1}, {2, 3}, {4, 5} under any
#: renaming of the racks (p 0 and 3, p 0 and 1 are on different racks)
RACK_OF = (0, 1, 1, 2, 2, 0)
#: Kafka API keys a client sends to a partition's leader only
PRODUCE, FETCH = 0, 1
SETTLE = 60.0


def replicas_of(topic: str, partition: int) -> tuple[int, ...]:
    """The replicas the proxy lists for *partition* of any topic: one broker."""
    return (REAL_NODE + RACK_OF[partition % len(RACK_OF)],)


def rack_partitions(rack: str) -> set[int]:
    """The partitions (of every topic with PARTITIONS) whose replica is on *rack*."""
    return {p for p in range(PARTITIONS) if RACKS[replicas_of("", p)[0]] == rack}


@pytest.fixture
def proxy(broker: EmbeddedBroker) -> Iterator[MetadataProxy]:
    """A :class:`MetadataProxy` in front of the session's broker, giving it racks."""
    with MetadataProxy(
        broker.port, real_node=REAL_NODE, racks=RACKS, replicas_of=replicas_of
    ) as running:
        yield running


def test_through_the_proxy_a_client_sees_three_racked_brokers_and_still_reads(
    broker: EmbeddedBroker, proxy: MetadataProxy
) -> None:
    """The proxy itself: aiokafka's cluster metadata has the racks and replicas
    the proxy gives, and a consumer assigned every partition reads through it."""
    topic = "sj-rack-proxy-check"
    run(create_topic(broker.bootstrap, topic, PARTITIONS))

    sent = [(encode(f"k{p}"), encode(p), p) for p in range(PARTITIONS)]
    run(produce(proxy.bootstrap, topic, sent))

    async def look() -> tuple[dict[int, Any], dict[int, Any], set[int]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=proxy.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            await consumer.topics()  # a Metadata request of every topic
            cluster = consumer._client.cluster
            brokers = {b.nodeId: (b.host, b.port, b.rack) for b in cluster.brokers()}
            parts = {
                p: (m.leader, m.partition, tuple(m.replicas))
                for p, m in cluster._partitions[topic].items()
            }
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            read: set[int] = set()
            for _ in range(20):  # bounded: 20 fetches of at most 0.5 s
                batch = await consumer.getmany(timeout_ms=500)
                read |= {tp.partition for tp, records in batch.items() if records}
                if len(read) == PARTITIONS:
                    break
            return brokers, parts, read
        finally:
            await consumer.stop()

    brokers, parts, read = run(look())
    assert read == set(range(PARTITIONS))
    assert brokers == {node: ("127.0.0.1", proxy.ports[node], rack) for node, rack in RACKS.items()}
    assert parts == {p: (REAL_NODE, p, replicas_of(topic, p)) for p in range(PARTITIONS)}
    assert proxy.rewritten and not proxy.unrewritten, proxy.errors


# -- real workers -------------------------------------------------------------------------


class RackedGroup:
    """Three workers of ``apps/racked.py`` (one per rack) bootstrapped through the proxy."""

    def __init__(self, proxy: MetadataProxy, tmp_path: Path, app_id: str) -> None:
        self.proxy = proxy
        self.tmp_path = tmp_path
        self.app_id = app_id
        self.workers: dict[str, WorkerProcess] = {}

    @property
    def orders(self) -> str:
        return f"{self.app_id}-orders"

    @property
    def payments(self) -> str:
        return f"{self.app_id}-payments"

    def start(self, rack: str, extra_args: tuple[str, ...] = ()) -> WorkerProcess:
        worker = WorkerProcess(
            "apps.racked:app",
            self.proxy.url,
            self.tmp_path / rack,
            self.tmp_path / f"{rack}.log",
            env={"SJ_TEST_APP_ID": self.app_id, "SJ_TEST_PARTITIONS": str(PARTITIONS)},
            cwd=APPS,
            extra_args=("--rack", rack, "--host-label", f"host-{rack}", *extra_args),
        )
        self.workers[rack] = worker
        return worker.start()

    def stable(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """``(statuses by rack, the leader's stats)`` once every worker runs the
        leader's latest generation, the join's tasks are all placed, and no
        warm-up or withheld task is left (the placement is the final one)."""
        statuses = {}
        for rack, worker in self.workers.items():
            status = read_status(self.tmp_path / rack)
            if status is None or not worker.running():
                return None
            statuses[rack] = status
        generations = {s["assignor"]["generation"] for s in statuses.values()}
        if len(generations) != 1 or None in generations:
            return None
        (generation,) = generations
        leaders = [s["leader"] for s in statuses.values() if s["leader"].get("generation")]
        stats = max(leaders, key=lambda s: s["generation"], default=None)
        if stats is None or stats["generation"] != generation:
            return None
        if stats.get("warmups") or stats.get("withheld"):
            return None
        if any(any(s["assignor"]["warmups"].values()) for s in statuses.values()):
            return None
        for topic in (self.orders, self.payments):
            owned = sorted(
                p for s in statuses.values() for p in s["assignor"]["actives"].get(topic, [])
            )
            if owned != list(range(PARTITIONS)):
                return None
        return statuses, stats

    def wait_stable(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The stable placement, seen twice 1 s apart (no rebalance pending)."""

        def twice() -> tuple[dict[str, Any], dict[str, Any]] | None:
            first = self.stable()
            if first is None:
                return None
            time.sleep(1.0)
            second = self.stable()
            if second is None or second[1]["generation"] != first[1]["generation"]:
                return None
            return second

        found: tuple[dict[str, Any], dict[str, Any]]
        found = wait_until(twice, SETTLE, f"the workers of {self.app_id} to settle")
        return found

    def kill_all(self) -> None:
        for worker in self.workers.values():
            worker.kill()


@pytest.fixture
def group(
    broker: EmbeddedBroker, proxy: MetadataProxy, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[RackedGroup]:
    digest = hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    app_id = "sjr-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[5:30] + digest
    for side in ("orders", "payments"):
        run(create_topic(broker.bootstrap, f"{app_id}-{side}", PARTITIONS))
    g = RackedGroup(proxy, tmp_path, app_id)
    try:
        yield g
    finally:
        g.kill_all()


def _actives(statuses: dict[str, Any], topic: str) -> dict[str, set[int]]:
    return {rack: set(s["assignor"]["actives"].get(topic, [])) for rack, s in statuses.items()}


def _changelog(statuses: dict[str, Any], group: RackedGroup) -> str:
    """The join state's changelog topic (the one active topic besides the inputs
    with PARTITIONS partitions)."""
    topics: set[str] = {
        t
        for s in statuses.values()
        for t in s["assignor"]["actives"]
        if t.endswith("-changelog") and t.startswith(group.app_id)
    }
    assert len(topics) == 1, topics
    return topics.pop()


def _crossing(statuses: dict[str, Any]) -> set[tuple[str, int]]:
    """Active (topic, partition)s on a worker outside their replica's rack (the
    rule is the same for every topic, the leader's assignor topic included)."""
    return {
        (topic, p)
        for rack, s in statuses.items()
        for topic, parts in s["assignor"]["actives"].items()
        for p in parts
        if p not in rack_partitions(rack)
    }


@pytest.mark.parametrize(
    ("traffic_cost", "staggered"),
    [(None, False), (None, True), ("0", False)],
    ids=["rack-aware", "rack-aware-joining", "traffic-cost-0"],
)
def test_the_leader_places_each_task_on_the_worker_of_its_partitions_rack(
    group: RackedGroup, proxy: MetadataProxy, traffic_cost: str | None, staggered: bool
) -> None:
    extra = ("--rack-traffic-cost", traffic_cost) if traffic_cost is not None else ()
    for rack in RACKS.values():
        worker = group.start(rack, extra)
        if staggered:
            # it runs every task the group has (and its state) before the next one
            # joins: the leader must move tasks off it, to their racks, by warm-ups
            worker.wait_for_log(r"streamjoin: rebalance generation", SETTLE)
            for topic in (group.orders, group.payments):
                records = [(encode(f"k{i % 60}"), encode(i), None) for i in range(300)]
                run(produce(proxy.bootstrap, topic, records))
    statuses, stats = group.wait_stable()
    changelog = _changelog(statuses, group)
    topics = [group.orders, group.payments, changelog]
    placed = {t: _actives(statuses, t) for t in topics}
    report = f"leader stats {stats}; actives {placed}"
    # every partition of the join's topics has one active, two per worker
    for topic in topics:
        assert sorted(p for parts in placed[topic].values() for p in parts) == list(
            range(PARTITIONS)
        ), report
        assert sorted(len(parts) for parts in placed[topic].values()) == [2, 2, 2], report
    # the leader's stats count what the actives show: a task of the join reads
    # three partitions (orders, payments, changelog) of one index, so one rack
    crossing = _crossing(statuses)
    assert stats["cross_rack_traffic"] == len(crossing), report
    tasks = {("join" if t in topics else t, p) for t, p in crossing}  # and the leader's topic
    assert stats["cross_rack_tasks"] == len(tasks), report
    if traffic_cost is None:
        assert stats["cross_rack_tasks"] == 0, report
        assert stats["target_cross_rack_tasks"] == 0, report
        for topic in topics:
            assert placed[topic] == {rack: rack_partitions(rack) for rack in RACKS.values()}, (
                topic,
                report,
            )
    else:  # rack-oblivious: RACK_OF makes a round-robin or range placement cross
        assert stats["cross_rack_tasks"] > 0, report
        assert stats["target_cross_rack_tasks"] == stats["cross_rack_tasks"], report
    # the proxy rewrote every Metadata response, and the fake brokers
    # (reached for metadata) never got a partition's reads or writes
    assert not proxy.unrewritten and not proxy.errors, (proxy.unrewritten, proxy.errors)
    assert sum(n for (_, key), n in proxy.requests.items() if key == METADATA) > 0
    for node in RACKS:
        if node != REAL_NODE:
            assert proxy.requests[(node, PRODUCE)] == proxy.requests[(node, FETCH)] == 0
