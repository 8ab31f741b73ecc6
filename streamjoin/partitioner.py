"""Kafka's default partitioner for a keyed record, its murmur2 hash compiled. Pure.

Kafka, aiokafka and faust put a keyed record on partition
``(murmur2(key) & 0x7fffffff) % partitions`` (murmur2 with Kafka's seed,
``org.apache.kafka.common.utils.Utils.murmur2``). aiokafka's hash is pure
Python: 2.75 us for a 23-byte click id, against 0.12 us for the
``murmurhash2`` package's (compiled, pinned in pyproject.toml). A join
partitions every outcome it sends, so that was 3.7% of a worker's time on the
1M-record benchmark backlog (docs/benchmarks.rst, "Expiry that follows what
expires, murmur2 compiled").

The tests compare the package's choice with aiokafka's own partitioner on
arbitrary keys, and the join's sender's with aiokafka's on the embedded broker.
"""

from __future__ import annotations

from murmurhash2 import murmurhash2

__all__ = ["KAFKA_SEED", "partition_for_key"]

#: the seed of Kafka's murmur2
KAFKA_SEED = 0x9747B28C


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for *key* among *partitions*."""
    return (murmurhash2(key, KAFKA_SEED) & 0x7FFFFFFF) % partitions
