"""The order in which a fetch request lists its partitions: least behind first.

A broker fills a fetch response in the order the request lists partitions, up
to the response's byte limit (Apache Kafka always answers with the first
partition's first record batch, then stops at ``fetch.max.bytes``; the
embedded broker also stops early, and answers more than the per-partition
limit for a partition with a backlog). A partition listed after a backlog
then gets nothing in that response, and its records wait for the next one:
after a worker took a dead worker's tasks over, its own tasks' records
waited behind the backlog it took over (docs/benchmarks.rst, "Least behind
first in every fetch"). Listed first, a partition that is nearly caught up
costs a response a few records, and a backlog fills what is left instead of
crowding it out.

A request lists partitions grouped by topic (one entry per topic), so topics
are ordered too: the topic with the fewest records behind in all first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["FetchTopics", "least_behind_first"]

#: a fetch request's partitions: (topic, [(partition, offset, max_bytes), ...]), ...
FetchTopics = Sequence[tuple[str, Sequence[tuple[int, int, int]]]]


def least_behind_first(
    topics: FetchTopics, behind: Callable[[str, int, int], int]
) -> list[tuple[str, list[tuple[int, int, int]]]]:
    """*topics* reordered: in each topic its partitions by records behind, fewest
    first; topics by their partitions' records behind in all, fewest first.

    *behind(topic, partition, offset)* is how many records the partition has
    after *offset* as far as the consumer knows (0 when it does not). Ties are
    broken by partition number and topic name, so the order is deterministic.
    """
    ordered = []
    for topic, partitions in topics:
        lags = sorted((max(0, behind(topic, p[0], p[1])), p[0], p) for p in partitions)
        ordered.append((sum(lag for lag, _, _ in lags), topic, [p for _, _, p in lags]))
    ordered.sort(key=lambda entry: (entry[0], entry[1]))
    return [(topic, partitions) for _, topic, partitions in ordered]
