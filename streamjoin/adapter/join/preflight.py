"""Start-up check: the topics of every join have the same partition count on the broker."""

from __future__ import annotations

from typing import Any

from streamjoin.adapter.topics import broker_partition_counts
from streamjoin.join.errors import JoinCopartitionError

__all__ = ["check_join_partitions", "join_partition_problems"]


def join_partition_problems(joins: Any, counts: dict[str, int]) -> list[str]:
    """One message per join whose topics' counts (on the broker) disagree."""
    problems = []
    for name in sorted(joins):
        join = joins[name]
        left, right = join.left_topic, join.right_topic
        have = {t: counts[t] for t in (left, right) if t in counts}
        if len(have) == 2 and have[left] != have[right]:
            problems.append(
                f"join {name!r}: topic {left!r} has {have[left]} partitions and {right!r} has "
                f"{have[right]}; a join reads partition N of both topics as one task, so the "
                "counts must be equal. Fix: recreate the topics with the same count (or "
                "repartition one into a new topic with the other's count), then start the worker"
            )
            continue
        for topic, count in sorted(have.items()):
            if count != join.partitions:
                problems.append(
                    f"join {name!r}: topic {topic!r} has {count} partitions but the app declares "
                    f"{join.partitions}; declare partitions={count} on both topics of the join "
                    "(or recreate the topic with the declared count)"
                )
    return problems


def check_join_partitions(app: Any, bootstrap: str, timeout: float) -> None:
    """Raise :class:`JoinCopartitionError` naming every mismatch; no-op without joins."""
    joins = getattr(app, "joins", None) or {}
    if not joins:
        return
    topics = sorted({t for j in joins.values() for t in (j.left_topic, j.right_topic)})
    problems = join_partition_problems(joins, broker_partition_counts(bootstrap, topics, timeout))
    if problems:
        raise JoinCopartitionError("; ".join(problems))
