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
Decision time ``d`` is the highest minimum of the two inputs' watermarks
reached (:mod:`streamjoin.join.watermarks`; an idle input is left out); a
record at ``ts`` is late when ``ts + grace < d`` (:meth:`JoinWindow.is_late`)
and is reported, never joined. A right record that could pair with ``l`` has
``r.ts <= l.ts + after``; it can still arrive non-late while
``d - grace <= l.ts + after``. So ``l``'s window closes, and ``(l, None)``
is emitted, at the first decision time with::

    d > l.ts + after + grace          (left,  see :func:`closes_after`)
    d > r.ts + before + grace         (right: lefts match up to r.ts + before)

The bound is tight: at ``d == l.ts + after + grace`` a right record at
``l.ts + after`` is still on time and pairs with ``l``. With every input's
own disorder at most ``grace``, no record is late, whichever input arrives
first.

State
-----
The per-task state layout (families ``S``, ``L``, ``R``, ``E``) and how long
a record is kept are documented in :mod:`streamjoin.join.windowed_task`. A
record is kept exactly until its window closes, then deleted.

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

Where the code lives
--------------------
This module re-exports every name; the code is split by concern:
:mod:`streamjoin.join.windowed_records` (record and result types, the close
bound, the reference :func:`windowed_join`), :mod:`streamjoin.join.windowed_task`
(:class:`TaskWindowedJoin`, the per-task logic over its state) and
:mod:`streamjoin.join.windowed_policy` (record ids, decoding, result encoding,
:class:`WindowedJoinPolicy`).
"""

from __future__ import annotations

from streamjoin.join.policy import Late
from streamjoin.join.windowed_policy import (
    JOINED,
    Decode,
    WindowedJoinPolicy,
    content_rid,
    default_decode,
    encode_result,
)
from streamjoin.join.windowed_records import (
    JoinKind,
    JoinRecord,
    JoinResult,
    Side,
    closes_after,
    windowed_join,
)
from streamjoin.join.windowed_task import (
    CLOSE,
    LEFT_RECORD,
    RIGHT_RECORD,
    STREAM_TIME,
    TaskWindowedJoin,
)

__all__ = [
    "CLOSE",
    "JOINED",
    "LEFT_RECORD",
    "RIGHT_RECORD",
    "STREAM_TIME",
    "Decode",
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
