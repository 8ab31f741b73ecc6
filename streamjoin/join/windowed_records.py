"""Record and result types of the windowed joins, the close bound and the reference. Pure.

:class:`JoinKind` and :class:`Side` name the join and its inputs;
:class:`JoinRecord` is one record of either side and :class:`JoinResult` a
pair or an unmatched record. :func:`closes_after` is the decision time after
which a record's window is closed, and :func:`windowed_join` the reference
result set the stream is compared against. The semantics are in
:mod:`streamjoin.join.windowed`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from streamjoin.join import keys
from streamjoin.join.errors import JoinError
from streamjoin.join.window import JoinWindow

__all__ = [
    "JoinKind",
    "JoinRecord",
    "JoinResult",
    "Side",
    "closes_after",
    "windowed_join",
]


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
    """The decision time after which no record can still pair with one at *ts* on *side*.

    A left record's window closes once decision time is greater than
    ``ts + after + grace``, a right record's once it is greater than
    ``ts + before + grace``; its unmatched result is emitted then.
    """
    reach = window.after if side is Side.LEFT else window.before
    return min(keys.MAX_TS, ts + reach + window.grace)


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
