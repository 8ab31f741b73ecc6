"""Errors raised by the assignment core."""

from __future__ import annotations

from streamjoin.errors import ConfigurationError, StreamjoinError

__all__ = [
    "AssignmentError",
    "CopartitioningError",
    "InvalidGroupStateError",
    "PartitionCountError",
    "TopicMismatchError",
]


class AssignmentError(StreamjoinError):
    """The group state cannot be assigned."""


class InvalidGroupStateError(AssignmentError, ConfigurationError):
    """The group-state document is malformed or inconsistent."""


class CopartitioningError(AssignmentError, ConfigurationError):
    """Topics declared co-partitioned (joined) have different partition counts.

    ``counts`` maps every topic of the offending group to its partition count.
    """

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = dict(sorted(counts.items()))
        listing = ", ".join(f"{topic!r} has {n} partitions" for topic, n in self.counts.items())
        target = max(self.counts.values())
        super().__init__(
            "co-partitioned topics (read together as one task per partition number: a "
            f"join's inputs and state) must have the same number of partitions, but {listing}. "
            "Fix: recreate or repartition the smaller topics so that all of them have the "
            f"same count (for example {target} partitions each), or stop declaring them as joined."
        )


class PartitionCountError(AssignmentError, ConfigurationError):
    """A topic has another partition count on the broker than the app declares for it."""

    def __init__(self, topic: str, declared: int, actual: int) -> None:
        self.topic, self.declared, self.actual = topic, declared, actual
        super().__init__(
            f"topic {topic!r} has {actual} partitions on the broker but the app declares "
            f"{declared}. Fix: recreate the topic with {declared} partitions or declare "
            f"partitions={actual} in the app"
        )


class TopicMismatchError(AssignmentError, ConfigurationError):
    """The broker's topics do not fit the app; ``problems`` holds each mismatch."""

    def __init__(self, problems: list[CopartitioningError | PartitionCountError]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))
