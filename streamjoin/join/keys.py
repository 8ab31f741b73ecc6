"""Key encoding of a join task's state: pure functions, ordered for range scans.

Every key starts with a one-byte family, so each family is one contiguous
range. Strings are length-prefixed (2 bytes) and times are 8-byte big-endian
unsigned, so byte order is (key, time, id) order and "all impressions of
auction K between t1 and t2" is a single range scan.

====== ============================================ =========================
family layout                                       value
====== ============================================ =========================
``t``  ``t``                                        stream time (8 bytes)
``i``  ``i`` key ts id                              an impression (JSON)
``c``  ``c`` key ts id                              a click and its outcome
``d``  ``d`` due ts key id   (index, local)         pending click, by due time
``x``  ``x`` ts kind key id  (index, local)         expiry order
``p``  ``p`` side                                   next input offset of a side
====== ============================================ =========================
"""

from __future__ import annotations

from streamjoin.join.errors import JoinError

__all__ = [
    "MAX_TS",
    "STREAM_TIME",
    "decode_due",
    "decode_expiry",
    "decode_record_key",
    "due_key",
    "expiry_key",
    "family_range",
    "position_key",
    "record_key",
    "record_prefix",
    "ts_bytes",
]

#: the largest event time a key can hold (ms); far beyond any real clock
MAX_TS = 2**63 - 1

STREAM_TIME = b"t"
IMPRESSION = b"i"
CLICK = b"c"
DUE = b"d"
POSITION = b"p"
EXPIRY = b"x"


def ts_bytes(ts: int) -> bytes:
    """An event time as 8 sortable bytes."""
    if not 0 <= ts <= MAX_TS:
        raise JoinError(f"event time {ts} is outside 0..{MAX_TS} ms")
    return ts.to_bytes(8, "big")


def _text(value: str) -> bytes:
    raw = value.encode()
    if len(raw) > 0xFFFF:
        raise JoinError(f"a key or id of {len(raw)} bytes is over the 65535-byte limit")
    return len(raw).to_bytes(2, "big") + raw


def _read_text(raw: bytes, at: int) -> tuple[str, int]:
    size = int.from_bytes(raw[at : at + 2], "big")
    end = at + 2 + size
    return raw[at + 2 : end].decode(), end


def record_prefix(family: bytes, key: str) -> bytes:
    """Prefix of every record of *family* (``i`` or ``c``) with join key *key*."""
    return family + _text(key)


def record_key(family: bytes, key: str, ts: int, rid: str) -> bytes:
    """Key of one impression or click."""
    return family + _text(key) + ts_bytes(ts) + rid.encode()


def decode_record_key(raw: bytes) -> tuple[str, int, str]:
    """``(key, ts, id)`` of a record key."""
    key, at = _read_text(raw, 1)
    return key, int.from_bytes(raw[at : at + 8], "big"), raw[at + 8 :].decode()


def due_key(due: int, ts: int, key: str, rid: str) -> bytes:
    """Index key of a pending click, ordered by when it can be decided."""
    return DUE + ts_bytes(due) + ts_bytes(ts) + _text(key) + rid.encode()


def decode_due(raw: bytes) -> tuple[int, int, str, str]:
    """``(due, ts, key, id)`` of a due key."""
    due = int.from_bytes(raw[1:9], "big")
    ts = int.from_bytes(raw[9:17], "big")
    key, at = _read_text(raw, 17)
    return due, ts, key, raw[at:].decode()


def expiry_key(ts: int, family: bytes, key: str, rid: str) -> bytes:
    """Index key that expires record ``family/key/ts/rid`` once ``ts`` is old."""
    return EXPIRY + ts_bytes(ts) + family + _text(key) + rid.encode()


def decode_expiry(raw: bytes) -> bytes:
    """The record key an expiry key points at."""
    family = raw[9:10]
    key, at = _read_text(raw, 10)
    return record_key(family, key, int.from_bytes(raw[1:9], "big"), raw[at:].decode())


def family_range(family: bytes) -> tuple[bytes, bytes]:
    """``[start, end)`` of one family."""
    return family, bytes([family[0] + 1])


def position_key(side: str) -> bytes:
    """Key of the next input offset to process on *side* (``left``/``right``)."""
    return POSITION + side.encode()
