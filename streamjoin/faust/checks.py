"""Start-up check: topics read together have the same partition count on the broker.

Covers every join (``app.joins``) and every group in ``app.copartitioned_topics``;
``streamjoin.worker.run.check_joins`` reads the counts and raises.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "group_partition_problems",
    "join_partition_problems",
    "partition_problems",
    "topics_to_check",
]


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


def group_partition_problems(
    groups: list[tuple[str, ...]], counts: dict[str, int], skip: set[frozenset[str]]
) -> list[str]:
    """One message per co-partition group whose existing topics' counts differ."""
    problems = []
    for group in sorted(groups):
        have = {t: counts[t] for t in sorted(group) if t in counts}
        if len(set(have.values())) <= 1 or any(s <= frozenset(have) for s in skip):
            continue
        listed = ", ".join(f"{t!r} has {n}" for t, n in have.items())
        problems.append(
            f"co-partitioned topics differ in partition count ({listed}); they are read "
            "together as one task per partition number. Fix: recreate them with one count "
            "(or repartition into new topics), then start the worker"
        )
    return problems


def topics_to_check(app: Any) -> list[str]:
    """The topics of the app's joins and co-partition groups (empty: nothing to check)."""
    joins = getattr(app, "joins", None) or {}
    groups = [tuple(g) for g in getattr(app, "copartitioned_topics", ()) or ()]
    topics = {t for j in joins.values() for t in (j.left_topic, j.right_topic)}
    return sorted(topics | {t for g in groups for t in g})


def partition_problems(app: Any, counts: dict[str, int]) -> list[str]:
    """Every mismatch among the app's joins and co-partition groups, given broker counts."""
    joins = getattr(app, "joins", None) or {}
    groups = [tuple(g) for g in getattr(app, "copartitioned_topics", ()) or ()]
    problems = join_partition_problems(joins, counts)
    reported = {frozenset((j.left_topic, j.right_topic)) for j in joins.values()}
    return problems + group_partition_problems(groups, counts, reported)
