"""Generic windowed stream-stream joins: inner, left and outer, per task. Pure.

A left record ``l`` and a right record ``r`` with the same key form a pair
when ``window.matches(l.ts, r.ts)``, i.e. ``l.ts - before <= r.ts <= l.ts +
after`` (equivalently ``r.ts - after <= l.ts <= r.ts + before``).

* ``INNER`` emits every pair ``(l, r)`` as soon as its second record arrives.
  Pairs are final: each is emitted once, whatever the arrival order.
* ``LEFT`` also emits ``(l, None)`` for a left record that never formed a
  pair, once its window has closed (below).
* ``OUTER`` also emits ``(None, r)`` for an unmatched right record, likewise.

When a window closes
--------------------
Stream time ``st`` is the largest event time the task has seen; a record at
``ts`` is late when ``ts < st - grace`` (:meth:`JoinWindow.is_late`) and is
reported, never joined. A right record that could pair with ``l`` has
``r.ts <= l.ts + after``; it can still arrive non-late while
``st - grace <= l.ts + after``. So ``l``'s window closes, and ``(l, None)``
is emitted, at the first stream time with::

    st > l.ts + after + grace          (left,  see :func:`closes_after`)
    st > r.ts + before + grace         (right: lefts match up to r.ts + before)

The bound is tight: at ``st == l.ts + after + grace`` a right record at
``l.ts + after`` is still on time and pairs with ``l``.

State (all in a :class:`~streamjoin.join.state.KVState`)
--------------------------------------------------------
====== ============================================== ==========================
family layout                                         value
====== ============================================== ==========================
``S``  ``S``                                          stream time (8 bytes)
``L``  ``L`` key ts rid                               flag byte + left value
``R``  ``R`` key ts rid                               flag byte + right value
``E``  ``E`` closes_after ``L``/``R`` key ts rid      (index, local) close order
====== ============================================== ==========================

The flag says whether the record has formed a pair (only kept up to date on
a side whose unmatched results are emitted). A record is kept exactly until
its window closes, then deleted (after emitting its unmatched result, if it
has one): the retention horizon is ``st > ts + after + grace`` for a left
record and ``st > ts + before + grace`` for a right one. That is also the
last moment it is useful: any record that could still pair with it, or a
second copy of it, is late from then on. State therefore holds
``after + grace`` ms of left records and ``before + grace`` ms of right ones.

What is guaranteed
------------------
* Without a crash: every result of :func:`windowed_join` is emitted exactly
  once. Feeding a record again (same side, key, ts and rid) emits nothing:
  while it is in state its presence says its pairs were emitted; once it is
  gone its window is closed and the copy is late (reported, not joined).
* Crash and replay (state restored from any prefix of its changelog that
  holds everything up to the committed input, :meth:`rebuild_indexes`, input
  replayed from the committed point): the results emitted before and after
  the crash together are exactly the reference set, and each result key
  ``(left rid, right rid)`` is always emitted with the same value. A result
  whose state writes were lost in the crash is emitted again, so outputs are
  effectively once when keyed by :attr:`JoinResult.ids`. Writes are ordered
  so that a lost write is always re-done by the replay: the pair flag of a
  stored record is written before the record that paired with it, and a
  record is deleted only after its unmatched result was emitted. A replayed
  record whose processing did reach the changelog and whose window has
  closed since is reported as late; every result it takes part in was
  already emitted. "Prefix" means a prefix of the content writes in the
  order they were made, as :attr:`MemoryState.changelog` records them and as
  the runtime's ``BatchState`` sends them to the changelog.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from streamjoin.join import keys
from streamjoin.join.errors import JoinError
from streamjoin.join.policy import BadRecord, Emission, Late, PolicyTask
from streamjoin.join.state import KVState, MemoryState
from streamjoin.join.window import JoinWindow

__all__ = [
    "JOINED",
    "JoinKind",
    "JoinRecord",
    "JoinResult",
    "Late",
    "Side",
    "TaskWindowedJoin",
    "WindowedJoinPolicy",
    "closes_after",
    "content_rid",
    "default_decode",
    "encode_result",
    "windowed_join",
]

#: the output the windowed join policy emits its results to
JOINED = "joined"

STREAM_TIME = b"S"
LEFT_RECORD = b"L"
RIGHT_RECORD = b"R"
CLOSE = b"E"

_OPEN = b"\x00"
_PAIRED = b"\x01"


class JoinKind(StrEnum):
    """Which results a windowed join emits besides its pairs."""

    INNER = "inner"
    LEFT = "left"
    OUTER = "outer"


class Side(StrEnum):
    """The side of the join a record comes from."""

    LEFT = "left"
    RIGHT = "right"


@dataclass(frozen=True)
class JoinRecord:
    """One record of either side.

    ``rid`` identifies the record on its side: two records of one side with
    the same ``rid`` must be the same record (same key, ts and value).
    """

    key: str
    rid: str
    ts: int
    value: bytes

    def __post_init__(self) -> None:
        if isinstance(self.ts, bool) or not isinstance(self.ts, int):
            raise JoinError(f"JoinRecord.ts must be an int (ms), got {self.ts!r}")
        if not 0 <= self.ts <= keys.MAX_TS:
            raise JoinError(f"JoinRecord.ts {self.ts} is outside 0..{keys.MAX_TS} ms")


@dataclass(frozen=True)
class JoinResult:
    """A pair ``(left, right)`` or an unmatched record (the other side ``None``)."""

    left: JoinRecord | None
    right: JoinRecord | None

    @property
    def ids(self) -> tuple[str | None, str | None]:
        """``(left rid, right rid)``: the result's identity, stable across replays."""
        return (
            None if self.left is None else self.left.rid,
            None if self.right is None else self.right.rid,
        )

    @property
    def key(self) -> str:
        """The join key shared by its records."""
        record = self.left if self.left is not None else self.right
        return "" if record is None else record.key


def closes_after(window: JoinWindow, side: Side, ts: int) -> int:
    """The stream time after which no record can still pair with one at *ts* on *side*.

    A left record's window closes once stream time is greater than
    ``ts + after + grace``, a right record's once it is greater than
    ``ts + before + grace``; its unmatched result is emitted then.
    """
    reach = window.after if side is Side.LEFT else window.before
    return min(keys.MAX_TS, ts + reach + window.grace)


def _family(side: Side) -> bytes:
    return LEFT_RECORD if side is Side.LEFT else RIGHT_RECORD


def _close_key(due: int, family: bytes, key: str, ts: int, rid: str) -> bytes:
    return CLOSE + keys.ts_bytes(due) + keys.record_key(family, key, ts, rid)


def _upper(prefix: bytes, hi: int) -> bytes:
    """Exclusive end of the records under *prefix* with ``ts <= hi``.

    Ids are UTF-8, which never holds the byte 0xff.
    """
    return prefix + keys.ts_bytes(hi) + b"\xff"


class TaskWindowedJoin:
    """A windowed join of one task (one partition of both sides).

    Feed records in arrival order with :meth:`on_left` / :meth:`on_right`;
    each call returns the results that became final (and a :class:`Late` if
    the record is late). All state lives in the :class:`KVState`; after a
    restore call :meth:`rebuild_indexes` before feeding records.
    """

    def __init__(self, kind: JoinKind, window: JoinWindow, state: KVState | None = None) -> None:
        self.kind = JoinKind(kind)
        self.window = window
        self.state: KVState = state if state is not None else MemoryState()
        raw = self.state.get(STREAM_TIME)
        #: the largest event time seen (``None`` before the first record)
        self.stream_time: int | None = None if raw is None else int.from_bytes(raw, "big")
        self.late_count = 0

    # -- feeding ------------------------------------------------------------
    def on_left(self, record: JoinRecord) -> list[JoinResult | Late]:
        """Add a left record; return what became final."""
        return self._on(Side.LEFT, record)

    def on_right(self, record: JoinRecord) -> list[JoinResult | Late]:
        """Add a right record; return what became final."""
        return self._on(Side.RIGHT, record)

    def flush(self) -> list[JoinResult | Late]:
        """End of input: advance stream time to its maximum and close every window.

        Emits every pending unmatched result and empties the state; any record
        fed afterwards is late.
        """
        self.stream_time = keys.MAX_TS
        self.state.put(STREAM_TIME, keys.ts_bytes(keys.MAX_TS))
        return list(self._close(*keys.family_range(CLOSE)))

    def checkpoint(self) -> None:
        """Nothing to write: this logic persists stream time at every advance."""

    def rebuild_indexes(self) -> None:
        """Recreate the local close index from the stored records.

        Windows that closed before a crash but whose records are still stored
        close at the next record fed.
        """
        for key, _ in self.state.scan(*keys.family_range(CLOSE)):
            self.state.delete_index(key)
        for side in Side:
            family = _family(side)
            for key, _ in self.state.scan(*keys.family_range(family)):
                jkey, ts, rid = keys.decode_record_key(key)
                due = closes_after(self.window, side, ts)
                self.state.put_index(_close_key(due, family, jkey, ts, rid), b"")

    # -- introspection ------------------------------------------------------
    def stored(self) -> int:
        """Records held in state (both sides)."""
        return sum(len(self.state.scan(*keys.family_range(f))) for f in (LEFT_RECORD, RIGHT_RECORD))

    def emits_unmatched(self, side: Side) -> bool:
        """Whether records of *side* that never pair are emitted (``(l, None)``...)."""
        if self.kind is JoinKind.OUTER:
            return True
        return self.kind is JoinKind.LEFT and side is Side.LEFT

    # -- internals ----------------------------------------------------------
    def _on(self, side: Side, record: JoinRecord) -> list[JoinResult | Late]:
        family = _family(side)
        rkey = keys.record_key(family, record.key, record.ts, record.rid)
        if self.state.get(rkey) is not None:
            return self._advance(record.ts)  # fed again: its pairs were emitted
        if self.window.is_late(record.ts, self.stream_time):
            self.late_count += 1
            return [Late(record, side.value, self.stream_time or 0)]
        out: list[JoinResult | Late] = list(self._pair(side, record))
        flag = _PAIRED if out else _OPEN
        # written after the flags of the records it paired with (see module doc)
        self.state.put(rkey, flag + record.value)
        due = closes_after(self.window, side, record.ts)
        self.state.put_index(_close_key(due, family, record.key, record.ts, record.rid), b"")
        out.extend(self._advance(record.ts))
        return out

    def _pair(self, side: Side, record: JoinRecord) -> list[JoinResult]:
        """Pairs of *record* with the stored records of the other side, in key order."""
        other = Side.RIGHT if side is Side.LEFT else Side.LEFT
        # other side's ts in [ts - before, ts + after] for a left record, mirrored for a right
        below, above = (
            (self.window.before, self.window.after)
            if side is Side.LEFT
            else (self.window.after, self.window.before)
        )
        prefix = keys.record_prefix(_family(other), record.key)
        lo = max(0, record.ts - below)
        hi = min(keys.MAX_TS, record.ts + above)
        flag_others = self.emits_unmatched(other)
        out: list[JoinResult] = []
        for okey, raw in self.state.scan(prefix + keys.ts_bytes(lo), _upper(prefix, hi)):
            if flag_others and raw[:1] == _OPEN:
                self.state.put(okey, _PAIRED + raw[1:])
            found = _record(okey, raw)
            out.append(
                JoinResult(record, found) if side is Side.LEFT else JoinResult(found, record)
            )
        return out

    def _advance(self, ts: int) -> list[JoinResult | Late]:
        if self.stream_time is None or ts > self.stream_time:
            self.stream_time = ts
            self.state.put(STREAM_TIME, keys.ts_bytes(ts))
        # windows with closes_after < stream time, earliest first
        return list(self._close(CLOSE, CLOSE + keys.ts_bytes(self.stream_time)))

    def _close(self, start: bytes, end: bytes) -> list[JoinResult]:
        out: list[JoinResult] = []
        for ckey, _ in self.state.scan(start, end):
            rkey = ckey[9:]
            raw = self.state.get(rkey)
            if raw is not None:
                side = Side.LEFT if rkey[:1] == LEFT_RECORD else Side.RIGHT
                if raw[:1] == _OPEN and self.emits_unmatched(side):
                    found = _record(rkey, raw)
                    out.append(
                        JoinResult(found, None) if side is Side.LEFT else JoinResult(None, found)
                    )
                # deleting it is the mark that its unmatched result was emitted
                self.state.delete(rkey)
            self.state.delete_index(ckey)
        return out


def _record(rkey: bytes, raw: bytes) -> JoinRecord:
    key, ts, rid = keys.decode_record_key(rkey)
    return JoinRecord(key, rid, ts, raw[1:])


def _order(record: JoinRecord) -> tuple[str, int, str]:
    return record.key, record.ts, record.rid


def _result_order(result: JoinResult) -> tuple[bool, str, bool, str]:
    left, right = result.ids
    return left is None, left or "", right is None, right or ""


def windowed_join(
    kind: JoinKind,
    window: JoinWindow,
    lefts: Iterable[JoinRecord],
    rights: Iterable[JoinRecord],
) -> list[JoinResult]:
    """The reference: every result computed directly from all records (none late).

    No ordering, no state, quadratic: what the tests (and a batch job) compare
    the stream against. Equal records on one side count once. Sorted by
    :attr:`JoinResult.ids` (unmatched rights last).
    """
    kind = JoinKind(kind)
    left_records = sorted(set(lefts), key=_order)
    right_records = sorted(set(rights), key=_order)
    out: list[JoinResult] = []
    paired_left: set[JoinRecord] = set()
    paired_right: set[JoinRecord] = set()
    for left in left_records:
        for right in right_records:
            if left.key == right.key and window.matches(left.ts, right.ts):
                out.append(JoinResult(left, right))
                paired_left.add(left)
                paired_right.add(right)
    if kind is not JoinKind.INNER:
        out.extend(JoinResult(left, None) for left in left_records if left not in paired_left)
    if kind is JoinKind.OUTER:
        out.extend(JoinResult(None, right) for right in right_records if right not in paired_right)
    return sorted(out, key=_result_order)


# -- the policy ---------------------------------------------------------------

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
    value = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
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
