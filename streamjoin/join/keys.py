"""Generic key encoding of a join task's state: pure functions, ordered for range scans.

Every key starts with a one-byte family, so each family is one contiguous
range. Strings are length-prefixed (2 bytes) and times are 8-byte big-endian
unsigned, so byte order is (key, time, id) order and "all records of key K
between t1 and t2" is a single range scan.

The runtime owns one family, ``p`` (``p`` side → next input offset of a
side); every policy defines its own families on top of these helpers (the ad
policy's are in :mod:`streamjoin.ads.keys`, the windowed join's in
:mod:`streamjoin.join.windowed`).
"""

from __future__ import annotations

from streamjoin.join.errors import JoinError

__all__ = [
    "MAX_TS",
    "POSITION",
    "decode_record_key",
    "family_range",
    "position_key",
    "read_text",
    "record_key",
    "record_prefix",
    "text_bytes",
    "ts_bytes",
]

#: the largest event time a key can hold (ms); far beyond any real clock
MAX_TS = 2**63 - 1

#: the runtime's family: the next input offset of each side
POSITION = b"p"


def ts_bytes(ts: int) -> bytes:
    """An event time as 8 sortable bytes."""
    if not 0 <= ts <= MAX_TS:
        raise JoinError(f"event time {ts} is outside 0..{MAX_TS} ms")
    return ts.to_bytes(8, "big")


def text_bytes(value: str) -> bytes:
    """*value* as a 2-byte length and its UTF-8 bytes (sorts by value within a length)."""
    raw = value.encode()
    if len(raw) > 0xFFFF:
        raise JoinError(f"a key or id of {len(raw)} bytes is over the 65535-byte limit")
    return len(raw).to_bytes(2, "big") + raw


def read_text(raw: bytes, at: int) -> tuple[str, int]:
    size = int.from_bytes(raw[at : at + 2], "big")
    end = at + 2 + size
    return raw[at + 2 : end].decode(), end


def record_prefix(family: bytes, key: str) -> bytes:
    """Prefix of every record of *family* with join key *key*."""
    return family + text_bytes(key)


def record_key(family: bytes, key: str, ts: int, rid: str) -> bytes:
    """Key of one record: family, join key, event time, record id."""
    return family + text_bytes(key) + ts_bytes(ts) + rid.encode()


def decode_record_key(raw: bytes) -> tuple[str, int, str]:
    """``(key, ts, id)`` of a record key."""
    key, at = read_text(raw, 1)
    return key, int.from_bytes(raw[at : at + 8], "big"), raw[at + 8 :].decode()


def family_range(family: bytes) -> tuple[bytes, bytes]:
    """``[start, end)`` of one family."""
    return family, bytes([family[0] + 1])


def position_key(side: str) -> bytes:
    """Key of the next input offset to process on *side* (``left``/``right``)."""
    return POSITION + side.encode()
