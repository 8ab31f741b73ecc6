"""The windowed join as a join policy: record ids, decoding, result encoding. Pure.

:class:`WindowedJoinPolicy` is what ``app.join`` takes for a generic windowed
join: it decodes the two topics' raw records into
:class:`~streamjoin.join.windowed_records.JoinRecord` objects (ids from
:func:`content_rid`), builds a :class:`~streamjoin.join.windowed_task.TaskWindowedJoin`
per task and encodes its results (:func:`encode_result`) to the output
:data:`JOINED`.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streamjoin.join import keys
from streamjoin.join.json_out import dumps_sorted
from streamjoin.join.policy import (
    LEFT,
    BadRecord,
    Decoded,
    Emission,
    PolicyTask,
    Raw,
    decode_each,
)
from streamjoin.join.state import KVState
from streamjoin.join.window import JoinWindow
from streamjoin.join.windowed_records import JoinKind, JoinRecord, JoinResult
from streamjoin.join.windowed_task import TaskWindowedJoin

__all__ = [
    "JOINED",
    "Decode",
    "WindowedJoinPolicy",
    "content_rid",
    "default_decode",
    "encode_result",
]

#: the output the windowed join policy emits its results to
JOINED = "joined"

#: ``decode(key, value, timestamp_ms) -> (join key, value)``; raise BadRecord to reject
Decode = Callable[[bytes | None, bytes | None, int], tuple[str, bytes]]


def content_rid(key: str, ts: int, value: bytes) -> str:
    """A stable id of a record from its content: a hash of ``(key, ts, value)``.

    Identical records of one side get the same id, so they count as one.
    """
    raw = key.encode()
    digest = hashlib.blake2b(digest_size=16)
    digest.update(len(raw).to_bytes(4, "big") + raw + keys.ts_bytes(ts) + value)
    return digest.hexdigest()


def default_decode(key: bytes | None, value: bytes | None, timestamp_ms: int) -> tuple[str, bytes]:
    """Join key = the record key as UTF-8 text; value = the record value as is."""
    if key is None:
        raise BadRecord("no record key: a windowed join needs a key to join on")
    try:
        text = key.decode()
    except UnicodeDecodeError as exc:
        raise BadRecord(f"record key is not UTF-8 ({exc})") from None
    if value is None:
        raise BadRecord("no record value (a tombstone): nothing to join")
    return text, value


def _side_doc(record: JoinRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    doc: dict[str, Any] = {"id": record.rid, "ts": record.ts}
    try:
        doc["value"] = record.value.decode()
    except UnicodeDecodeError:
        doc["value_base64"] = base64.b64encode(record.value).decode()
    return doc


def encode_result(result: JoinResult) -> Emission:
    """The emission of a result to :data:`JOINED`, keyed ``"<left rid>|<right rid>"``.

    The value is JSON ``{"key", "left", "right"}`` (a side is ``null`` when
    absent, else ``{"id", "ts", "value"}`` with the value as UTF-8 text, or
    ``"value_base64"`` when it is not UTF-8); keys sorted, so a replay
    re-emits byte-identical records.
    """
    left, right = result.ids
    doc = {"key": result.key, "left": _side_doc(result.left), "right": _side_doc(result.right)}
    value = dumps_sorted(doc)
    return Emission(JOINED, f"{left or ''}|{right or ''}".encode(), value)


@dataclass(frozen=True)
class WindowedJoinPolicy:
    """Policy: a windowed ``kind`` join of two topics on their record keys.

    ``decode(key, value, timestamp_ms)`` gives a record's join key and value
    (default: :func:`default_decode`); it raises
    :class:`~streamjoin.join.policy.BadRecord` to reject one. A record's event
    time is its Kafka timestamp and its id :func:`content_rid`: identical
    records (same key, timestamp and value) on one side collapse into one.
    Results go to the single output :data:`JOINED`; late records to
    :data:`~streamjoin.join.policy.DEAD_LETTER` with the reason.
    """

    kind: JoinKind
    window: JoinWindow
    decode: Decode | None = None

    @property
    def outputs(self) -> Sequence[str]:
        """The one output, :data:`JOINED`."""
        return (JOINED,)

    def decode_left(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> JoinRecord:
        """A left :class:`JoinRecord`, or :class:`BadRecord`."""
        return self._decode("left", key, value, timestamp_ms)

    def decode_right(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> JoinRecord:
        """A right :class:`JoinRecord`, or :class:`BadRecord`."""
        return self._decode("right", key, value, timestamp_ms)

    def decode_chunk(self, side: str, records: Sequence[Raw]) -> Decoded:
        """A chunk of input *side* decoded a record at a time."""
        return decode_each(self.decode_left if side == LEFT else self.decode_right, records)

    def task(self, state: KVState) -> PolicyTask[JoinResult]:
        """The join of one task over its state."""
        logic = TaskWindowedJoin(self.kind, self.window, state)
        return PolicyTask(logic, encode_result, self.window.grace)

    def _decode(
        self, side: str, key: bytes | None, value: bytes | None, timestamp_ms: int
    ) -> JoinRecord:
        if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int):
            raise BadRecord(f"{side}: timestamp {timestamp_ms!r} is not an int of ms")
        if not 0 <= timestamp_ms <= keys.MAX_TS:
            raise BadRecord(f"{side}: timestamp {timestamp_ms} ms is negative or out of range")
        try:
            jkey, jvalue = (self.decode or default_decode)(key, value, timestamp_ms)
        except BadRecord as exc:
            raise BadRecord(f"{side}: {exc.reason}") from None
        if len(jkey.encode()) > 0xFFFF:
            raise BadRecord(f"{side}: join key of {len(jkey.encode())} bytes is over 65535")
        return JoinRecord(jkey, content_rid(jkey, timestamp_ms, jvalue), timestamp_ms, jvalue)
