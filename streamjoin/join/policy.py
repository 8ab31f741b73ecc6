"""What a join operator needs from a join: decoding, per-task logic, outputs. Pure.

A :class:`JoinPolicy` turns the raw records of the two joined topics into the
policy's own record types (or rejects them with :class:`BadRecord`), builds
the per-task logic over a task's :class:`~streamjoin.join.state.KVState`,
and encodes what the logic emits as :class:`Emission` objects addressed to a
named output. The runtime (``streamjoin.join.operator``) does every I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from streamjoin.join.errors import JoinError
from streamjoin.join.state import KVState
from streamjoin.join.window import JoinWindow

__all__ = ["DEAD_LETTER", "BadRecord", "Emission", "JoinPolicy", "TaskLogic"]

#: output name of records that cannot be joined (bad input, late records)
DEAD_LETTER = "dead-letter"


class BadRecord(JoinError):
    """A record cannot be decoded or validated; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Emission:
    """One record the join sends to its output ``output``."""

    output: str
    key: bytes | None
    value: bytes


class TaskLogic(Protocol):
    """The join of one task: fed decoded records in event-time order."""

    stream_time: int | None

    def on_left(self, record: Any) -> Sequence[Emission]:
        """Add a left record; return what became final."""

    def on_right(self, record: Any) -> Sequence[Emission]:
        """Add a right record; return what became final."""

    def rebuild_indexes(self) -> None:
        """Recreate local (not changelogged) indexes from the state's content."""

    def checkpoint(self) -> None:
        """Write what the logic keeps in memory between records (e.g. stream time).

        The runtime calls it at the end of each batch, before the batch's input
        positions; a restored state then never has a stream time ahead of the
        records it holds.
        """


class JoinPolicy(Protocol):
    """A kind of join: its record types, its per-task logic, its outputs."""

    @property
    def window(self) -> JoinWindow:
        """The join window."""

    @property
    def outputs(self) -> Sequence[str]:
        """Names of the outputs it emits to (besides :data:`DEAD_LETTER`)."""

    def decode_left(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> Any:
        """A left record, or :class:`BadRecord`."""

    def decode_right(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> Any:
        """A right record, or :class:`BadRecord`."""

    def task(self, state: KVState) -> TaskLogic:
        """The logic of one task over its state."""
