"""The per-task logic of the windowed joins, over its key-value state. Pure.

:class:`TaskWindowedJoin` joins one task (one partition of both sides): it
pairs records as they arrive, closes windows as decision time (the minimum
of the two inputs' watermarks, :mod:`streamjoin.join.watermarks`) passes them and
keeps everything in a :class:`~streamjoin.join.state.KVState`, so a restored
state resumes where the changelog left off. Semantics and guarantees are in
:mod:`streamjoin.join.windowed`.

State (all in a :class:`~streamjoin.join.state.KVState`)
--------------------------------------------------------
====== ============================================== ==========================
family layout                                         value
====== ============================================== ==========================
``S``  ``S``                                          watermarks, decision time
``L``  ``L`` key ts rid                               flag byte + left value
``R``  ``R`` key ts rid                               flag byte + right value
``E``  ``E`` closes_after ``L``/``R`` key ts rid      (index, local) close order
====== ============================================== ==========================

The flag says whether the record has formed a pair (only kept up to date on
a side whose unmatched results are emitted). A record is kept exactly until
its window closes, then deleted (after emitting its unmatched result, if it
has one): the retention horizon is ``decided > ts + after + grace`` for a
left record and ``decided > ts + before + grace`` for a right one. That is also the
last moment it is useful: any record that could still pair with it, or a
second copy of it, is late from then on. State therefore holds
``after + grace`` ms of left records and ``before + grace`` ms of right ones.
"""

from __future__ import annotations

from streamjoin.join import keys
from streamjoin.join.policy import SIDES, Late
from streamjoin.join.state import KVState, MemoryState
from streamjoin.join.watermarks import Watermarks
from streamjoin.join.window import JoinWindow
from streamjoin.join.windowed_records import (
    JoinKind,
    JoinRecord,
    JoinResult,
    Side,
    closes_after,
)

__all__ = ["CLOSE", "LEFT_RECORD", "RIGHT_RECORD", "STREAM_TIME", "TaskWindowedJoin"]

STREAM_TIME = b"S"
LEFT_RECORD = b"L"
RIGHT_RECORD = b"R"
CLOSE = b"E"

_OPEN = b"\x00"
_PAIRED = b"\x01"


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
        #: the two inputs' watermarks and the decision time
        self.marks = Watermarks.decode(SIDES, self.state.get(STREAM_TIME))
        self.late_count = 0
        #: no close-index entry is below this key: where the next close's scan
        #: starts. Closing deletes the entries it passes, and a store's deletes
        #: stay as tombstones a scan from the family's start would walk again,
        #: every record (978 records/s against 33,995 on 36,000 records of one
        #: task, docs/benchmarks.rst); an entry added below it lowers it.
        self._close_from = CLOSE

    @property
    def decision_time(self) -> int | None:
        """The highest decision time reached (``None`` before anything is decided)."""
        return self.marks.decided

    # -- feeding ------------------------------------------------------------
    def on_left(self, record: JoinRecord) -> list[JoinResult | Late]:
        """Add a left record; return what became final."""
        return self._on(Side.LEFT, record)

    def on_right(self, record: JoinRecord) -> list[JoinResult | Late]:
        """Add a right record; return what became final."""
        return self._on(Side.RIGHT, record)

    def settle(self) -> list[JoinResult | Late]:
        """Nothing: this logic returns what became final with each record."""
        return []

    def set_idle(self, side: str, idle: bool) -> list[JoinResult | Late]:
        """The runtime reports input *side* idle or not; return what became final."""
        self.marks.set_idle(side, idle)
        return self._advance(None, None)

    def flush(self) -> list[JoinResult | Late]:
        """End of input: advance decision time to its maximum and close every window.

        Emits every pending unmatched result and empties the state; any record
        fed afterwards is late.
        """
        self.marks.decided = keys.MAX_TS
        self.state.put(STREAM_TIME, self.marks.encode())
        return list(self._close(*keys.family_range(CLOSE)))

    def checkpoint(self) -> None:
        """Nothing to write: this logic persists its watermarks at every advance."""

    def rebuild_indexes(self) -> None:
        """Recreate the local close index from the stored records.

        Windows that closed before a crash but whose records are still stored
        close at the next record fed.
        """
        for key, _ in self.state.scan(*keys.family_range(CLOSE)):
            self.state.delete_index(key)
        self._close_from = CLOSE
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
            return self._advance(side, record.ts)  # fed again: its pairs were emitted
        if self.window.is_late(record.ts, self.marks.decided):
            self.late_count += 1
            late = Late(record, side.value, self.marks.decided or 0)
            return [late, *self._advance(side, record.ts)]
        out: list[JoinResult | Late] = list(self._pair(side, record))
        flag = _PAIRED if out else _OPEN
        # written after the flags of the records it paired with (see
        # "What is guaranteed" in streamjoin.join.windowed)
        self.state.put(rkey, flag + record.value)
        due = closes_after(self.window, side, record.ts)
        close_key = _close_key(due, family, record.key, record.ts, record.rid)
        self.state.put_index(close_key, b"")
        if close_key < self._close_from:
            self._close_from = close_key
        out.extend(self._advance(side, record.ts))
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

    def _advance(self, side: Side | None, ts: int | None) -> list[JoinResult | Late]:
        """Note a record at *ts* on *side* (``None``: an idleness change), persist
        the watermarks, and close the windows the decision time has passed."""
        before = self.marks.encode()
        if side is not None and ts is not None:
            self.marks.observe(side.value, ts)
        decided = self.marks.advance()
        if self.marks.encode() != before:
            self.state.put(STREAM_TIME, self.marks.encode())
        if decided is None:
            return []
        # windows with closes_after < decision time, earliest first
        end = CLOSE + keys.ts_bytes(decided)
        out: list[JoinResult | Late] = list(self._close(self._close_from, end))
        self._close_from = max(self._close_from, end)
        return out

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
