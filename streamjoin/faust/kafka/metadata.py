"""What an app declares about its topics, and what the broker has (the one
credentialed partition-count reader, and the replicas of each partition).

Private attributes it depends on (aiokafka 0.14.0):

* ``ClusterMetadata._partitions`` (topic -> partition -> ``PartitionMetadata``):
  the only place aiokafka keeps a partition's replicas from the last metadata
  response (its public methods give the partitions and their leaders only).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from streamjoin.errors import BrokerUnreachable

if TYPE_CHECKING:
    from aiokafka.cluster import ClusterMetadata
    from faust.types import AppT, ChannelT, TopicT
    from faust.types.settings import Settings

__all__ = [
    "DeclaredTopics",
    "broker_racks",
    "declared_topics",
    "partition_counts",
    "partition_replicas",
]


@dataclass(frozen=True)
class DeclaredTopics:
    """Partition counts an app expects, and the groups it reads together."""

    #: topic -> partitions the app declares (None: whatever the broker has)
    partitions: Mapping[str, int | None]
    #: co-partition groups the app declares (``app.copartitioned_topics``)
    copartition: tuple[tuple[str, ...], ...]


def declared_topics(app: AppT) -> DeclaredTopics:
    """Read topics, partition counts and co-partition groups off a faust app."""
    default = app.conf.topic_partitions
    partitions: dict[str, int | None] = {}
    for agent in app.agents.values():
        for topic in _topics_of(agent.channel):
            partitions[topic.get_topic_name()] = topic.partitions or default
    for table in app.tables.values():
        partitions[table.changelog_topic.get_topic_name()] = table.partitions or default
    groups = [tuple(sorted(g)) for g in getattr(app, "copartitioned_topics", ())]
    return DeclaredTopics(dict(sorted(partitions.items())), tuple(sorted(set(groups))))


def _topics_of(channel: ChannelT[Any]) -> Iterable[TopicT]:  # Any: the values, any type
    import faust

    if isinstance(channel, faust.TopicT) and not channel.pattern:
        topics = channel.topics
        for name in topics:
            # faust declares derive() -> ChannelT; a topic derives a topic
            yield cast("TopicT", channel.derive(topics=[name])) if len(topics) > 1 else channel


async def _read_counts(conf: Settings, topics: list[str], timeout: float) -> dict[str, int]:
    from aiokafka import AIOKafkaConsumer
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth, server_list

    consumer = AIOKafkaConsumer(
        bootstrap_servers=server_list(conf.broker, 9092),
        enable_auto_commit=False,
        request_timeout_ms=max(int(timeout * 1000), 1000),
        **credentials_to_aiokafka_auth(conf.broker_credentials, conf.ssl_context),
    )
    try:
        await asyncio.wait_for(consumer.start(), timeout)
        existing = await consumer.topics()
        return {t: len(consumer.partitions_for_topic(t) or ()) for t in topics if t in existing}
    finally:
        await consumer.stop()


def partition_counts(
    conf: Settings, topics: Iterable[str], timeout: float = 15.0
) -> dict[str, int]:
    """Partition count of each of *topics* that exists on the broker: the one reader.

    Connects with the app's ``broker``, ``broker_credentials`` and
    ``ssl_context``, so it works on SASL and TLS clusters.

    Raises:
        BrokerUnreachable: the metadata cannot be read (broker gone, wrong
            security settings, credentials refused); the cause is chained.
    """
    from aiokafka.errors import KafkaError

    try:
        return asyncio.run(_read_counts(conf, sorted(set(topics)), timeout))
    except (TimeoutError, KafkaError, OSError) as exc:
        shown = ", ".join(f"{u.host}:{u.port or 9092}" for u in conf.broker)
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise BrokerUnreachable(
            f"cannot read topic metadata from {shown} ({type(exc).__name__}: {text}); "
            "check the broker address and --security-protocol and its credentials"
        ) from exc


def partition_replicas(
    cluster: ClusterMetadata, topics: Iterable[str]
) -> dict[str, dict[int, tuple[int, ...]]]:
    """Topic -> partition -> the broker ids of its replicas, for each of *topics*
    the cluster metadata knows, as the broker's last metadata response listed them."""
    known = cluster._partitions
    return {
        t: {p: tuple(meta.replicas) for p, meta in sorted(known[t].items())}
        for t in sorted(set(topics))
        if t in known
    }


def broker_racks(cluster: ClusterMetadata) -> dict[int, str | None]:
    """Broker id -> its rack (``broker.rack``; ``None``: it has none)."""
    return {b.nodeId: b.rack or None for b in cluster.brokers() if isinstance(b.nodeId, int)}
