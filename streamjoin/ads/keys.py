"""Key families of the ad policy's per-task state, over the generic :mod:`streamjoin.join.keys`
(re-exported here, so the policy reads its keys from one module).

====== ============================================ =========================
family layout                                       value
====== ============================================ =========================
``t``  ``t``                                        stream time (8 bytes)
``s``  ``s`` segment key ts id                      impressions of one segment (JSON list)
``v``  ``v`` segment key ts id                      decided clicks of one segment (JSON list)
``i``  ``i`` key ts id                (before 0.2 only)      an impression (JSON)
``q``  ``q`` key ts id                              clicks pending at a batch's end (JSON list)
``c``  ``c`` key ts id                (before 0.3 only)      a pending click (or decided)
``d``  ``d`` ...              (before 0.2 only)      pending click, by due time
``x``  ``x`` ...              (before 0.2 only)      expiry order
``k``  ``k`` campaign                               a campaign's folded counts
``p``  ``p`` side                                   next input offset of a side (runtime)
====== ============================================ =========================

The due and expiry orders (``d``, ``x``) were RocksDB rows before 0.2; they are
in memory now, and a task that opens drops rows an earlier version left.

Since 0.2 impressions and decided clicks are stored in *chunks* (``s``,
``v``): one row holds the records of one time segment that one part of a
batch stored, keyed by the segment's start and its first record (``key``,
``ts`` and ``id``: unique, a record is stored once), its value a JSON list of
``[key, ts, id, campaign, cost]`` (impressions) or ``[key, ts, id, outcome,
impression, campaign, cost]`` (clicks). A chunk is never rewritten: whether a
click billed an impression is read from the click's entry (outcome
``attributed`` and the impression's id), and a segment's chunks are deleted
whole when it expires. A click is in the segment of the later of its time and
that of the impression it billed, so it goes no earlier than that
impression.

Since 0.3 the clicks still pending at the end of a batch are one row too
(``q``, keyed by its first click, a JSON list of ``[key, ts, id]``), deleted
once all of them are decided; one that lists a click whose decided entry
expires is written anew without it first. Rows ``i``, and rows ``c`` (a
pending click, or a decided one before 0.2) of an earlier version are still
read (an impression's ``billed`` field too); a decided one expires on its
own, a pending one is deleted once decided.
"""

from __future__ import annotations

from streamjoin.join.keys import (
    MAX_TS,
    POSITION,
    decode_record_key,
    family_range,
    read_text,
    record_key,
    record_prefix,
    text_bytes,
    ts_bytes,
)

__all__ = [
    "CAMPAIGN",
    "CHUNK",
    "CLICK",
    "DUE",
    "EXPIRY",
    "FAMILY_NAMES",
    "IMPRESSION",
    "MAX_TS",
    "PENDING",
    "STREAM_TIME",
    "VERDICTS",
    "campaign_key",
    "chunk_key",
    "decode_campaign",
    "decode_record_key",
    "family_range",
    "record_key",
    "record_prefix",
    "text_bytes",
    "ts_bytes",
]

STREAM_TIME = b"t"
CAMPAIGN = b"k"
IMPRESSION = b"i"
CHUNK = b"s"
VERDICTS = b"v"
CLICK = b"c"
PENDING = b"q"
DUE = b"d"
EXPIRY = b"x"

#: first key byte -> what the family holds (for state reports)
FAMILY_NAMES: dict[int, str] = {
    STREAM_TIME[0]: "stream time",
    IMPRESSION[0]: "impressions (before 0.2)",
    CHUNK[0]: "impressions",
    VERDICTS[0]: "decided clicks",
    CLICK[0]: "clicks (before 0.3)",
    PENDING[0]: "pending clicks",
    DUE[0]: "due index",
    CAMPAIGN[0]: "campaign counts",
    EXPIRY[0]: "expiry index",
    POSITION[0]: "positions",
}


def campaign_key(campaign: str) -> bytes:
    """Key of a campaign's folded counts."""
    return CAMPAIGN + text_bytes(campaign)


def decode_campaign(raw: bytes) -> str:
    """The campaign of a campaign key."""
    return read_text(raw, 1)[0]


def chunk_key(family: bytes, segment: int, jkey: str, ts: int, rid: str) -> bytes:
    """Key of a chunk of *family* (impressions or decided clicks) of the segment
    starting at *segment*, whose first record is (*jkey*, *ts*, *rid*)."""
    return family + ts_bytes(segment) + text_bytes(jkey) + ts_bytes(ts) + rid.encode()
