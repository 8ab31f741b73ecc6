"""A task's two inputs taken in step by time: the records a batch may take now.

A fetch asks every partition for the same number of bytes, so an input of
small or rare records (clicks) covers far more event time per fetch than one
of large or frequent records (impressions). Taken as fetched, the first input
of a backlog runs hours of event time ahead of the second: every one of its
records waits in the task's state, undecided, until the other input catches
up, and the state grows with the backlog instead of with the join's window
(a 4.9M-record backlog held its clicks ten hours of event time ahead of its
impressions, and the worker's memory grew to a gigabyte).

So a task takes an input's records only up to ``lead`` milliseconds past the
latest record a batch took of the other input, while that other input still
has records not taken (in the inbox, or on the broker: behind its fetch high
watermark); the rest wait in the inbox, and the intake stops fetching an
input whose inbox is full (:mod:`~streamjoin.faust.join.intake`). The time is the records' Kafka
timestamp, which the join reads without decoding. Once the other input has
nothing left (taken, and caught up or idle), nothing waits for it. At most one
input waits at a time, the one ahead, and the other's records are all taken,
so the task always moves on.

It is a matter of order only: a join's outcomes do not depend on the order in
which its inputs arrive (``docs/joins.rst``): a record that waits is applied
as if it had been fetched later. Where the Kafka timestamp is the event
time, it is never one an outcome due now depends on (it is later than the
decision time, which is never past the input behind). Pure: no I/O, no faust.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from streamjoin.faust.join.types import LEFT, RIGHT, Chunk, InputRecord

__all__ = ["bounds", "take", "timestamp"]

#: below every timestamp: no record of that input taken (or waiting) yet
_NOTHING_YET = -(2**62)


def bounds(
    received: Mapping[str, int | None],
    taken: Mapping[str, int | None],
    heads: Mapping[str, int | None],
    behind: Mapping[str, bool],
    lead: int,
) -> dict[str, int]:
    """Per input that must wait, the latest timestamp a batch may take of it.

    *received*, *taken*: each input's latest record timestamp received, and
    taken by a batch; *heads*: the timestamp of each input's first record
    waiting in the inbox (``None``: none waits); *behind*: whether each input
    has records not taken yet; *lead*: how far (ms) one input may be taken
    past the other. An input waits, up to *lead* past the other's latest
    taken, when it received records later than that and the other has records
    not taken. When both would, only the one whose first record waiting is
    later does (then the one received further), so the other's records are
    taken and the task moves on.
    """
    out: dict[str, int] = {}
    for side, other in ((LEFT, RIGHT), (RIGHT, LEFT)):
        mine, done = received[side], taken[other]
        limit = _at(done) + lead
        if mine is not None and behind[other] and mine > limit:
            out[side] = limit
    if len(out) == 2:
        later = {side: (_at(heads[side]), _at(received[side])) for side in out}
        if later[LEFT] == later[RIGHT]:
            return {}
        del out[min(later, key=later.__getitem__)]
    return out


def _at(ts: int | None) -> int:
    return _NOTHING_YET if ts is None else ts


def take(
    inbox: Sequence[Chunk], limit: int | None, waits: Mapping[str, int]
) -> tuple[list[Chunk], list[Chunk], bool]:
    """Split *inbox* (chunks in arrival order) into what a batch takes and what
    stays, at most *limit* records taken (``None``: no limit), an input of
    *waits* only up to its timestamp there (see :func:`bounds`).

    Records of one input are taken in their order: once some of an input's
    records stay, its later ones stay too. Returns the chunks taken, those
    left, and whether records were left by *limit* alone (the next batch may
    take them at once).
    """
    taken: list[Chunk] = []
    left: list[Chunk] = []
    stopped: set[str] = set()  # inputs with records left
    capped = False
    room = limit
    for side, records in inbox:
        if side in stopped or room == 0:
            left.append((side, records))
            capped = capped or side not in stopped
            stopped.add(side)
            continue
        n = len(records)
        bound = waits.get(side)
        if bound is not None and timestamp(records[-1]) > bound:
            n = _upto(records, bound)
            stopped.add(side)
        if room is not None and n > room:
            n, capped = room, True
            stopped.add(side)
        if n == len(records):
            taken.append((side, records))
        elif n == 0:
            left.append((side, records))
        else:
            taken.append((side, records[:n]))
            left.append((side, records[n:]))
        if room is not None:
            room -= n
    return taken, left, capped


def _upto(records: Sequence[InputRecord], bound: int) -> int:
    """How many of *records* from the first have a timestamp up to *bound*, for
    records in timestamp order (a record out of order only moves the split)."""
    return bisect.bisect_right(records, bound, key=timestamp)


def timestamp(record: InputRecord) -> int:
    """*record*'s Kafka timestamp (ms; -1, Kafka's "none", when it has none)."""
    ts = record.timestamp
    return -1 if ts is None else ts
