"""Errors raised by the assignment core."""

from __future__ import annotations

from streamjoin.errors import ConfigurationError, StreamjoinError

__all__ = ["AssignmentError", "CopartitioningError", "InvalidGroupStateError"]


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
        listing = ", ".join(f"{topic!r} has {n}" for topic, n in self.counts.items())
        target = max(self.counts.values())
        super().__init__(
            "co-partitioned topics must have the same number of partitions, but "
            f"{listing}. Recreate or repartition the smaller topics so that all of them "
            f"have the same count (for example {target} partitions each), or stop "
            "declaring them as joined."
        )
