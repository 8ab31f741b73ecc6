"""The bytes members and the group leader exchange in a rebalance.

Never pickle: a compact, versioned JSON body, zlib-compressed, behind a
four-byte header (``b"SJ"``, kind, version). Partition lists travel as
ranges (``[[0, 63]]`` instead of 64 numbers).

Subscription userdata (member -> leader), :class:`MemberInfo`:

- version 1: id, url, host, generation, actives.
- version 2 (current): version 1 plus rack, capacity, standbys and the
  changelog offsets persisted in the member's local stores; optionally the
  warm-ups it was given (older version-2 readers ignore them).

Assignment userdata (leader -> member), :class:`AssignmentInfo`: the
generation, the member's own actives, standbys and warm-ups (optional: older
readers ignore them and restore nothing extra), and a routing table that
says which member serves each partition of each table: a list of member urls
plus, per changelog topic, one url index per partition. Its size grows with
members + partitions, not members² (faust sends every member every member's
full assignment).

Decoding never raises on bad bytes: :func:`decode_member` returns ``None``
for garbled data or an unknown version, and the leader treats that member as
a fresh one (with a warning, logged by the caller).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ASSIGNMENT_VERSION",
    "MEMBER_VERSION",
    "AssignmentInfo",
    "MemberInfo",
    "decode_assignment",
    "decode_member",
    "encode_assignment",
    "encode_member",
    "from_ranges",
    "to_ranges",
]

MAGIC = b"SJ"
_MEMBER = 0x4D  # "M"
_ASSIGNMENT = 0x41  # "A"
MEMBER_VERSION = 2
ASSIGNMENT_VERSION = 1
SUPPORTED_MEMBER_VERSIONS = (1, 2)

Partitions = Mapping[str, Sequence[int]]


@dataclass(frozen=True)
class MemberInfo:
    """What a member tells the leader when it joins a rebalance."""

    id: str
    url: str
    host: str
    rack: str | None = None
    capacity: int = 1
    generation: int | None = None
    actives: Partitions = field(default_factory=dict)
    standbys: Partitions = field(default_factory=dict)
    offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    #: the userdata version it was decoded from (or is to be encoded with)
    version: int = MEMBER_VERSION
    #: warm-up replicas of its last assignment (changelog topic -> partitions)
    warmups: Partitions = field(default_factory=dict)
    #: it kept its actives running through this rebalance (cooperative rebalancing)
    cooperative: bool = False


@dataclass(frozen=True)
class AssignmentInfo:
    """What the leader tells one member: its share and where everything lives."""

    generation: int
    actives: Partitions
    standbys: Partitions
    #: url of every member, indexed by ``routes``
    urls: tuple[str, ...]
    #: changelog topic -> per partition, the index into ``urls`` of its active
    routes: Mapping[str, tuple[int, ...]]
    #: topic -> index of its task group (faust uses it for transactional ids)
    groups: Mapping[str, int] = field(default_factory=dict)
    #: changelog partitions to restore as warm-up replicas (followed like standbys)
    warmups: Partitions = field(default_factory=dict)

    def route_map(self) -> dict[str, dict[str, list[int]]]:
        """url -> {topic: [partitions]}: the shape faust's router expects."""
        out: dict[str, dict[str, list[int]]] = {url: {} for url in self.urls}
        for topic, owners in self.routes.items():
            for partition, index in enumerate(owners):
                if index >= 0:
                    out[self.urls[index]].setdefault(topic, []).append(partition)
        return out


def to_ranges(partitions: Iterable[int]) -> list[list[int]]:
    """``[0, 1, 2, 5]`` -> ``[[0, 2], [5, 5]]`` (sorted, deduplicated)."""
    ranges: list[list[int]] = []
    for p in sorted(set(partitions)):
        if ranges and ranges[-1][1] == p - 1:
            ranges[-1][1] = p
        else:
            ranges.append([p, p])
    return ranges


def from_ranges(ranges: Iterable[Sequence[int]]) -> list[int]:
    """Inverse of :func:`to_ranges`; raises ValueError on malformed input."""
    out: list[int] = []
    for item in ranges:
        lo, hi = int(item[0]), int(item[1])
        if lo < 0 or hi < lo or hi - lo > 1_000_000:
            raise ValueError(f"bad partition range {item!r}")
        out.extend(range(lo, hi + 1))
    return out


def _pack(kind: int, version: int, body: Mapping[str, Any]) -> bytes:
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    return MAGIC + bytes([kind, version]) + zlib.compress(raw)


def _unpack(kind: int, data: bytes) -> tuple[int, Any] | None:
    if len(data) < 4 or data[:2] != MAGIC or data[2] != kind:
        return None
    try:
        return data[3], json.loads(zlib.decompress(data[4:]))
    except (zlib.error, ValueError, UnicodeDecodeError):
        return None


def _ranges_map(partitions: Partitions) -> dict[str, list[list[int]]]:
    return {topic: to_ranges(parts) for topic, parts in sorted(partitions.items()) if parts}


def _parts_map(body: Any) -> dict[str, list[int]]:
    if not isinstance(body, dict):
        raise ValueError("expected an object")
    return {str(topic): from_ranges(ranges) for topic, ranges in body.items()}


def encode_member(info: MemberInfo) -> bytes:
    """Subscription userdata for ``info``, in ``info.version``'s layout."""
    body: dict[str, Any] = {
        "id": info.id,
        "url": info.url,
        "host": info.host,
        "generation": info.generation,
        "actives": _ranges_map(info.actives),
    }
    if info.version >= 2:
        body.update(
            rack=info.rack,
            capacity=info.capacity,
            standbys=_ranges_map(info.standbys),
            offsets={
                topic: {str(p): o for p, o in sorted(offsets.items())}
                for topic, offsets in sorted(info.offsets.items())
            },
        )
        if info.warmups:
            body["warmups"] = _ranges_map(info.warmups)
        if info.cooperative:
            body["cooperative"] = True
    if info.version not in SUPPORTED_MEMBER_VERSIONS:
        raise ValueError(f"cannot encode member userdata version {info.version}")
    return _pack(_MEMBER, info.version, body)


def decode_member(data: bytes) -> MemberInfo | None:
    """Decode subscription userdata; ``None`` when garbled or of an unknown version."""
    unpacked = _unpack(_MEMBER, data)
    if unpacked is None:
        return None
    version, body = unpacked
    if version not in SUPPORTED_MEMBER_VERSIONS or not isinstance(body, dict):
        return None
    try:
        generation = body.get("generation")
        info = MemberInfo(
            id=_text(body["id"]),
            url=_text(body["url"]),
            host=_text(body["host"]),
            generation=None if generation is None else int(generation),
            actives=_parts_map(body.get("actives", {})),
            version=version,
        )
        if version >= 2:
            rack = body.get("rack")
            capacity = int(body.get("capacity", 1))
            if capacity < 1:
                return None
            offsets_body = body.get("offsets", {})
            if not isinstance(offsets_body, dict):
                return None
            info = MemberInfo(
                id=info.id,
                url=info.url,
                host=info.host,
                generation=info.generation,
                actives=info.actives,
                rack=None if rack is None else _text(rack),
                capacity=capacity,
                standbys=_parts_map(body.get("standbys", {})),
                offsets={
                    str(topic): {int(p): int(o) for p, o in by_p.items()}
                    for topic, by_p in offsets_body.items()
                },
                version=version,
                warmups=_parts_map(body.get("warmups", {})),
                cooperative=body.get("cooperative", False) is True,
            )
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None
    return info


def encode_assignment(info: AssignmentInfo) -> bytes:
    """Assignment userdata for one member."""
    body = {
        "generation": info.generation,
        "actives": _ranges_map(info.actives),
        "standbys": _ranges_map(info.standbys),
        "urls": list(info.urls),
        "routes": {topic: list(owners) for topic, owners in sorted(info.routes.items())},
        "groups": dict(sorted(info.groups.items())),
    }
    if info.warmups:
        body["warmups"] = _ranges_map(info.warmups)
    return _pack(_ASSIGNMENT, ASSIGNMENT_VERSION, body)


def decode_assignment(data: bytes) -> AssignmentInfo | None:
    """Decode assignment userdata; ``None`` when garbled or of an unknown version."""
    unpacked = _unpack(_ASSIGNMENT, data)
    if unpacked is None:
        return None
    version, body = unpacked
    if version != ASSIGNMENT_VERSION or not isinstance(body, dict):
        return None
    try:
        urls = tuple(_text(u) for u in body["urls"])
        routes = {
            str(topic): tuple(int(i) for i in owners) for topic, owners in body["routes"].items()
        }
        if any(i >= len(urls) for owners in routes.values() for i in owners):
            return None
        return AssignmentInfo(
            generation=int(body["generation"]),
            actives=_parts_map(body["actives"]),
            standbys=_parts_map(body["standbys"]),
            urls=urls,
            routes=routes,
            groups={str(t): int(g) for t, g in body.get("groups", {}).items()},
            warmups=_parts_map(body.get("warmups", {})),
        )
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value
