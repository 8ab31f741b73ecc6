"""Errors raised by the assignment core."""

from __future__ import annotations

from streamjoin.errors import ConfigurationError, StreamjoinError

__all__ = [
    "AssignmentError",
    "CopartitioningError",
    "InvalidGroupStateError",
    "PartitionCountError",
    "TopicMismatchError",
    "UnsafeHandoverError",
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


class UnsafeHandoverError(AssignmentError):
    """A cooperative assignment would give a partition to a member while another
    member still owns it (two owners in one generation).

    Raised by the leader before it sends the assignment: it means a bug in the
    assignor, never a problem of the group's input.
    """

    def __init__(self, topic: str, partition: int, new: str, old: tuple[str, ...]) -> None:
        self.topic, self.partition, self.new, self.old = topic, partition, new, old
        super().__init__(
            f"the assignment gives {topic}[{partition}] to {new!r} while "
            f"{', '.join(map(repr, old))} still own(s) it (cooperative rebalancing): "
            "two owners at once. The leader refused to send it; this is a bug in "
            "streamjoin's assignor: report it with the group state (streamjoin assign "
            "--explain on the document) and set cooperative=False to run eager meanwhile"
        )
