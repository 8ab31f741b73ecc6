"""What an app declares about its topics, and what the broker has."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DeclaredTopics", "broker_partition_counts", "declared_topics"]


@dataclass(frozen=True)
class DeclaredTopics:
    """Partition counts an app expects, and the groups it reads together."""

    #: topic -> partitions the app declares (None: whatever the broker has)
    partitions: Mapping[str, int | None]
    #: co-partition groups the app declares (``app.copartitioned_topics``)
    copartition: tuple[tuple[str, ...], ...]


def declared_topics(app: Any) -> DeclaredTopics:
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


def _topics_of(channel: Any) -> Iterable[Any]:
    import faust

    if isinstance(channel, faust.TopicT) and not channel.pattern:
        topics = channel.topics
        for name in topics:
            yield channel.derive(topics=[name]) if len(topics) > 1 else channel


async def _counts(bootstrap: str, topics: Iterable[str], timeout: float) -> dict[str, int]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await asyncio.wait_for(consumer.start(), timeout)
    try:
        existing = await consumer.topics()
        return {
            t: len(consumer.partitions_for_topic(t) or ()) for t in sorted(topics) if t in existing
        }
    finally:
        await consumer.stop()


def broker_partition_counts(
    bootstrap: str, topics: Iterable[str], timeout: float = 15.0
) -> dict[str, int]:
    """Partition count of each of ``topics`` that exists on the broker."""
    return asyncio.run(_counts(bootstrap, list(topics), timeout))
