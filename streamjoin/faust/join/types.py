"""What the join's adapter modules share: its frozen configuration, records in and out.

:class:`JoinConfig` is built once, when ``app.join(...)`` has checked and
declared everything (:func:`streamjoin.faust.join.declare.declare_join`); the
operator, its task registry, its router and its description read it and never
change it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeAlias

from streamjoin.join.policy import LEFT, RIGHT, SIDES, Raw
from streamjoin.join.window import JoinWindow

if TYPE_CHECKING:
    from faust.types import TopicT

__all__ = [
    "LEFT",
    "RIGHT",
    "SIDES",
    "Chunk",
    "Fetched",
    "InputRecord",
    "JoinConfig",
    "Output",
    "TopicArg",
]

#: a topic as ``app.join(...)`` takes it: its name, or a faust topic
TopicArg: TypeAlias = "str | TopicT"


class InputRecord(Raw, Protocol):
    """What the join reads of an input record: aiokafka's ``ConsumerRecord`` (taken
    from a fetch) and :class:`Fetched` have it: what a policy decodes (key,
    value, ``timestamp`` in milliseconds) and where it comes from."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...


#: a record to produce: (topic, key, value, headers)
Output = tuple[str, bytes | None, bytes, list[tuple[str, bytes]] | None]

#: records of one side received together (offset order)
Chunk = tuple[str, Sequence[InputRecord]]


class Fetched(NamedTuple):
    """An input record as the join reads it (aiokafka's ``ConsumerRecord`` has
    the same fields; ``timestamp`` is in milliseconds)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


@dataclass(frozen=True)
class JoinConfig:
    """One join's configuration, as checked and declared (topic names, not faust topics).

    Attributes:
        name: the join's name.
        left_topic: the left input's topic.
        right_topic: the right input's topic.
        partitions: the partition count of both inputs and the changelog.
        window: the policy's join window.
        changelog_topic: the changelog topic of the join's state table.
        outputs: output name -> topic name, for every output of the policy.
        dead_letters: the dead-letter topic's name.
        max_idle_ms: silence after which a caught-up input is idle.
        batch_max: records per task in one batch, at most.
        batch_interval: seconds between batches when no record arrives.
        max_record_bytes: larger input records are dead-lettered.
    """

    name: str
    left_topic: str
    right_topic: str
    partitions: int
    window: JoinWindow
    changelog_topic: str
    outputs: Mapping[str, str]
    dead_letters: str
    max_idle_ms: int
    batch_max: int
    batch_interval: float
    max_record_bytes: int

    @property
    def sides(self) -> dict[str, str]:
        """Input topic -> the join's side (``left``, ``right``)."""
        return {self.left_topic: LEFT, self.right_topic: RIGHT}

    @property
    def topics(self) -> dict[str, str]:
        """The join's side -> its input topic."""
        return {LEFT: self.left_topic, RIGHT: self.right_topic}
