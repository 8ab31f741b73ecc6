"""Do the broker's topics fit the app? The worker's start-up check and ``streamjoin topics check``.

Both apply the one co-partition rule and the declared-count rule of
:mod:`streamjoin.assignment.grouping` to the counts the one reader
(:func:`streamjoin.faust.kafka.metadata.partition_counts`) gets from the broker.
Joins declare their inputs and state co-partitioned (``app.copartitioned_topics``),
so they are covered with every other declared group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from streamjoin.assignment.errors import (
    CopartitioningError,
    PartitionCountError,
    TopicMismatchError,
)
from streamjoin.assignment.grouping import copartition_problems, declared_count_problems
from streamjoin.faust.kafka.metadata import DeclaredTopics, declared_topics, partition_counts

if TYPE_CHECKING:
    from faust.types import AppT

__all__ = ["check_topics", "topic_problems", "topics_read_together"]


def topics_read_together(declared: DeclaredTopics) -> list[str]:
    """Topics in any co-partition group (joins included): what the start-up check reads."""
    return sorted({topic for group in declared.copartition for topic in group})


def topic_problems(
    declared: DeclaredTopics, counts: Mapping[str, int], topics: list[str] | None = None
) -> list[CopartitioningError | PartitionCountError]:
    """Co-partition groups whose counts differ, then topics (of *topics*, default all
    declared) whose count differs from the app's declaration."""
    wanted = (
        declared.partitions if topics is None else {t: declared.partitions.get(t) for t in topics}
    )
    problems: list[CopartitioningError | PartitionCountError] = []
    problems += copartition_problems(counts, declared.copartition)
    problems += declared_count_problems(wanted, counts)
    return problems


def check_topics(app: AppT, timeout: float) -> None:
    """The worker's start-up check over the topics read together, with the app's credentials.

    Raises:
        BrokerUnreachable: the topic metadata cannot be read.
        TopicMismatchError: topics read together have different partition
            counts, or one differs from what the app declares.
    """
    declared = declared_topics(app)
    topics = topics_read_together(declared)
    if not topics:
        return
    counts = partition_counts(app.conf, topics, timeout)
    problems = topic_problems(declared, counts, topics)
    if problems:
        raise TopicMismatchError(problems)
