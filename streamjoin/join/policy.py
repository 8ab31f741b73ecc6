"""What a join operator needs from a join: decoding, per-task logic, outputs. Pure.

A :class:`JoinPolicy` turns the raw records of the two joined topics into the
policy's own record types (or rejects them with :class:`BadRecord`), builds
the per-task logic over a task's :class:`~streamjoin.join.state.KVState`,
and encodes what the logic emits as :class:`Emission` objects addressed to a
named output. The runtime (``streamjoin.faust.join.operator``) does every I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from streamjoin.join.errors import JoinError
from streamjoin.join.state import KVState
from streamjoin.join.window import JoinWindow

__all__ = [
    "DEAD_LETTER",
    "LEFT",
    "REASON_HEADER",
    "RIGHT",
    "SIDES",
    "SOURCE_HEADER",
    "BadRecord",
    "Decoded",
    "Emission",
    "JoinPolicy",
    "Late",
    "PolicyTask",
    "Raw",
    "ResultLogic",
    "TaskLogic",
    "chunk_decoder",
    "decode_each",
    "feed_chunk",
]

R = TypeVar("R")

#: the names of a join's two inputs
LEFT = "left"
RIGHT = "right"
SIDES = (LEFT, RIGHT)

#: header names on dead-letter records: why, and which input record
REASON_HEADER = "streamjoin-reason"
SOURCE_HEADER = "streamjoin-source"

#: output name of records that cannot be joined (bad input, late records)
DEAD_LETTER = "dead-letter"


class BadRecord(JoinError):
    """A record cannot be decoded or validated; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Emission(NamedTuple):
    """One record the join sends to its output ``output``."""

    output: str
    key: bytes | None
    value: bytes


class Raw(Protocol):
    """What a policy decodes: a record's key and value bytes and its timestamp
    (ms). Consumer records and the replay's records have them."""

    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def timestamp(self) -> int | None: ...


#: a chunk's decoded records, and the bad ones: (index in the chunk, reason)
Decoded = tuple[list[Any], list[tuple[int, str]]]


def decode_each(
    decode: Callable[[bytes | None, bytes | None, int], Any], records: Sequence[Raw]
) -> Decoded:
    """A chunk decoded one record at a time by *decode* (a policy's
    ``decode_left``/``decode_right``): what :meth:`JoinPolicy.decode_chunk`
    returns, for a policy with no faster way."""
    good: list[Any] = []
    bad: list[tuple[int, str]] = []
    for i, record in enumerate(records):
        try:
            good.append(decode(record.key, record.value, record.timestamp or 0))
        except BadRecord as exc:
            bad.append((i, exc.reason))
    return good, bad


def chunk_decoder(policy: JoinPolicy) -> Callable[[str, Sequence[Raw]], Decoded]:
    """*policy*'s ``decode_chunk``; for a policy written before chunks (no
    ``decode_chunk``), :func:`decode_each` over its ``decode_left`` /
    ``decode_right``."""
    own: Callable[[str, Sequence[Raw]], Decoded] | None = getattr(policy, "decode_chunk", None)
    if own is not None:
        return own
    return lambda side, records: decode_each(
        policy.decode_left if side == LEFT else policy.decode_right, records
    )


def feed_chunk(logic: TaskLogic, side: str, records: Sequence[Any]) -> list[tuple[int, Emission]]:
    """*logic*'s ``on_chunk``; for a logic written before chunks (no
    ``on_chunk``), its ``on_left`` / ``on_right`` one record at a time."""
    own = getattr(logic, "on_chunk", None)
    if own is not None:
        return own(side, records)  # type: ignore[no-any-return]
    feed = logic.on_left if side == LEFT else logic.on_right
    return [(i, emission) for i, record in enumerate(records) for emission in feed(record)]


class Keyed(Protocol):
    """What :class:`Late` needs of a record: its join key and event time."""

    @property
    def key(self) -> str: ...

    @property
    def ts(self) -> int: ...


@dataclass(frozen=True)
class Late:
    """A record that arrived beyond grace: reported on :data:`DEAD_LETTER`, never joined.

    ``side`` names the input in the report (``left``/``right``, or the
    policy's own names such as ``impression``/``click``).
    """

    record: Keyed
    side: str
    #: the highest decision time reached when it arrived
    decided: int

    def emission(self, grace: int) -> Emission:
        """The dead-letter record: keyed by the join key, the reason as its value
        (which input, the record's time, the decision time it came too late for)."""
        reason = (
            f"late: {self.side} record ts_ms {self.record.ts} + grace {grace} ms is below "
            f"decision time {self.decided}"
        )
        return Emission(DEAD_LETTER, self.record.key.encode(), reason.encode())


class TaskLogic(Protocol):
    """The join of one task: fed decoded records in arrival order (each input's own)."""

    @property
    def decision_time(self) -> int | None:
        """The highest decision time reached (:mod:`streamjoin.join.watermarks`)."""

    def on_left(self, record: Any) -> Sequence[Emission]:
        """Add a left record; return what became final."""

    def on_right(self, record: Any) -> Sequence[Emission]:
        """Add a right record; return what became final."""

    def on_chunk(self, side: str, records: Sequence[Any]) -> list[tuple[int, Emission]]:
        """Add *records*, decoded records of input *side* in arrival order; return
        what became final, each with the index of the record it came with (a
        dead letter names that record). The runtime's one way in: a chunk at a
        time, :meth:`on_left`/:meth:`on_right` one at a time."""

    def settle(self) -> Sequence[Emission]:
        """Return what became final and was not returned yet; the runtime calls
        it after each chunk of records of one input (a logic may decide once
        per chunk instead of once per record)."""

    def set_idle(self, side: str, idle: bool) -> Sequence[Emission]:
        """The runtime reports input *side* idle (caught up, silent for
        ``max_idle_ms``) or not; return what became final."""

    def rebuild_indexes(self) -> None:
        """Recreate local (not changelogged) indexes from the state's content."""

    def checkpoint(self) -> None:
        """Write what the logic keeps in memory between records (the watermarks).

        The runtime calls it at the end of each batch, before the batch's input
        positions; a restored state then never has watermarks ahead of the
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

    def decode_chunk(self, side: str, records: Sequence[Raw]) -> Decoded:
        """The records of a chunk of input *side* decoded: the good ones in order,
        and each bad one's index and reason (:func:`decode_each` does it a
        record at a time)."""

    def task(self, state: KVState) -> TaskLogic:
        """The logic of one task over its state."""


class ResultLogic(Protocol[R]):
    """A per-task logic object that returns its own results (and :class:`Late` items)."""

    @property
    def decision_time(self) -> int | None: ...

    def on_left(self, record: Any) -> list[R | Late]: ...

    def on_right(self, record: Any) -> list[R | Late]: ...

    def settle(self) -> list[R | Late]: ...

    def set_idle(self, side: str, idle: bool) -> list[R | Late]: ...

    def rebuild_indexes(self) -> None: ...

    def checkpoint(self) -> None: ...


class PolicyTask(Generic[R]):
    """:class:`TaskLogic` over a :class:`ResultLogic`: encodes results with *encode*,
    late records with :meth:`Late.emission`. The one task wrapper of every policy.

    A logic with an ``on_chunk(side, records)`` method of its own (returning
    ``(index, result)`` pairs) is fed a chunk in one call; any other is fed
    its records one at a time.
    """

    def __init__(self, logic: ResultLogic[R], encode: Callable[[R], Emission], grace: int) -> None:
        self.logic = logic
        self._encode_result = encode
        self._grace = grace
        self._chunk: Callable[[str, Sequence[Any]], list[tuple[int, R | Late]]] | None
        self._chunk = getattr(logic, "on_chunk", None)

    @property
    def decision_time(self) -> int | None:
        return self.logic.decision_time

    def on_left(self, record: Any) -> Sequence[Emission]:
        items = self.logic.on_left(record)
        return self._encode(items) if items else []

    def on_right(self, record: Any) -> Sequence[Emission]:
        items = self.logic.on_right(record)
        return self._encode(items) if items else []

    def on_chunk(self, side: str, records: Sequence[Any]) -> list[tuple[int, Emission]]:
        if self._chunk is not None:
            items = self._chunk(side, records)
        else:
            feed = self.logic.on_left if side == LEFT else self.logic.on_right
            items = [(i, item) for i, record in enumerate(records) for item in feed(record)]
        if not items:
            return []
        grace, encode = self._grace, self._encode_result
        return [
            (i, item.emission(grace) if isinstance(item, Late) else encode(item))
            for i, item in items
        ]

    def settle(self) -> Sequence[Emission]:
        items = self.logic.settle()
        return self._encode(items) if items else []

    def set_idle(self, side: str, idle: bool) -> Sequence[Emission]:
        return self._encode(self.logic.set_idle(side, idle))

    def rebuild_indexes(self) -> None:
        self.logic.rebuild_indexes()

    def checkpoint(self) -> None:
        self.logic.checkpoint()

    def _encode(self, items: list[R | Late]) -> list[Emission]:
        return [
            item.emission(self._grace) if isinstance(item, Late) else self._encode_result(item)
            for item in items
        ]
