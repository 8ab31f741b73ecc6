"""The JSON group-state document: parse, validate, assign, render.

This is the format ``streamjoin assign`` reads and prints, the property tests
and benchmarks use, and docs/assignment.rst documents. Parsing never trusts its input:
every problem is reported as an :class:`InvalidGroupStateError` naming the
offending field, never as a ``KeyError`` or ``TypeError``. The members' checks
are in :mod:`.document_members`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from streamjoin.assignment.assignor import as_built, check_handovers, member_tables, place
from streamjoin.assignment.document_members import (
    _fail,
    _int,
    _list,
    _member,
    _members_in_bulk,
    _obj,
    _partitions,
    _topic_list,
)
from streamjoin.assignment.model import Assignment, GroupState, LastAssignment

__all__ = ["assign_document", "parse_group_state", "render_assignment"]

_TOP_KEYS = frozenset(
    {
        "topics",
        "copartition",
        "changelogs",
        "global_changelogs",
        "standby_replicas",
        "acceptable_recovery_lag",
        "max_warmup_replicas",
        "last_assignment",
        "members",
        "partition_racks",
        "partition_weights",
        "rack_traffic_cost",
        "rack_move_cost",
    }
)


def parse_group_state(doc: Any) -> GroupState:
    """Validate a group-state document and build the :class:`GroupState`."""
    return _parse(doc, share=False)


def _parse(doc: Any, share: bool) -> GroupState:
    root = _obj(doc, "document")
    unknown = sorted(set(root) - _TOP_KEYS)
    if unknown:
        raise _fail("document", f"unknown field(s) {unknown}; allowed: {sorted(_TOP_KEYS)}")
    if "topics" not in root:
        raise _fail("document", 'missing "topics": map every topic to its partition count')
    topics = {
        _str_key(name, "topics"): _int(count, f"topics.{name}", 1)
        for name, count in _obj(root["topics"], "topics").items()
    }
    if "members" not in root:
        raise _fail("document", 'missing "members": list the group\'s members')
    raw_members = _list(root["members"], "members")
    if not raw_members:
        raise _fail("members", "the group has no members: nothing to assign to")
    subscriptions: dict[tuple[Any, ...], tuple[str, ...]] = {}
    members = _members_in_bulk(raw_members, topics, subscriptions, share)
    if members is None:  # something is off: check member by member, naming the culprit
        members = tuple(
            _member(m, f"members[{i}]", topics, subscriptions) for i, m in enumerate(raw_members)
        )
    seen: set[str] = set()
    for member in members:
        if member.id in seen:
            raise _fail("members", f"member id {member.id!r} appears twice; ids must be unique")
        seen.add(member.id)
    copartition = tuple(
        _topic_list(group, f"copartition[{i}]", topics)
        for i, group in enumerate(_list(root.get("copartition", []), "copartition"))
    )
    changelogs = frozenset(_topic_list(root.get("changelogs", []), "changelogs", topics))
    global_changelogs = frozenset(
        _topic_list(root.get("global_changelogs", []), "global_changelogs", topics)
    )
    return GroupState(
        topics=topics,
        members=members,
        copartition=copartition,
        changelogs=changelogs,
        global_changelogs=global_changelogs,
        standby_replicas=_int(root.get("standby_replicas", 0), "standby_replicas", 0),
        acceptable_recovery_lag=_int(
            root.get("acceptable_recovery_lag", 10_000), "acceptable_recovery_lag", 0
        ),
        max_warmup_replicas=(
            None
            if root.get("max_warmup_replicas") is None
            else _int(root["max_warmup_replicas"], "max_warmup_replicas", 0)
        ),
        last_assignment=_last_assignment(root.get("last_assignment"), topics),
        partition_racks=_per_partition(
            root.get("partition_racks", {}), "partition_racks", topics, _racks
        ),
        partition_weights=_per_partition(
            root.get("partition_weights", {}), "partition_weights", topics, _weight
        ),
        rack_traffic_cost=_int(root.get("rack_traffic_cost", 10), "rack_traffic_cost", 0),
        rack_move_cost=_int(root.get("rack_move_cost", 1), "rack_move_cost", 0),
    )


_Item = TypeVar("_Item")


def _per_partition(
    value: Any, where: str, topics: dict[str, int], item: Callable[[Any, str], _Item]
) -> dict[str, tuple[_Item, ...]]:
    """``{topic: [one item per partition]}`` for topics of the document."""
    found: dict[str, tuple[_Item, ...]] = {}
    # rows repeat (most partitions share their racks): each distinct row is checked
    # once, and equal rows of every topic share one checked value
    seen: dict[tuple[Any, ...], _Item] = {}
    for topic, listed in sorted(_obj(value, where).items()):
        name = f"{where}.{topic}"
        if topic not in topics:
            raise _fail(name, f'unknown topic {topic!r}; list it under "topics" first')
        rows = _list(listed, name)
        if len(rows) != topics[topic]:
            raise _fail(
                name, f"expected one entry per partition ({topics[topic]}), got {len(rows)}"
            )
        keys = _row_keys(rows)
        if keys is None:  # not all lists of hashable values: row by row
            found[topic] = tuple(item(row, f"{name}[{p}]") for p, row in enumerate(rows))
            continue
        for key in set(keys).difference(seen):
            at = keys.index(key)
            seen[key] = item(rows[at], f"{name}[{at}]")
        found[topic] = tuple(map(seen.__getitem__, keys))
    return found


def _row_keys(rows: list[Any]) -> list[tuple[Any, ...]] | None:
    """Each row as a hashable key, when every row is a list of hashable values."""
    if not all(type(row) is list for row in rows):
        return None
    keys = list(map(tuple, rows))
    try:
        set(keys)
    except TypeError:
        return None
    return keys


def _racks(value: Any, where: str) -> tuple[str, ...]:
    """The racks of one partition's replicas: a list of non-empty strings."""
    listed = _list(value, where)
    if not all(isinstance(rack, str) and rack for rack in listed):
        raise _fail(where, f"expected a list of rack names (non-empty strings), got {value!r}")
    return tuple(sorted(set(listed)))


def _weight(value: Any, where: str) -> int:
    return _int(value, where, 0)


def _last_assignment(value: Any, topics: dict[str, int]) -> LastAssignment | None:
    """``{"generation": G, "actives": {member id: {topic: [partitions]}}}`` or null."""
    if value is None:
        return None
    where = "last_assignment"
    obj = _obj(value, where)
    unknown = sorted(set(obj) - {"generation", "actives"})
    if unknown:
        raise _fail(where, f"unknown field(s) {unknown}; allowed: ['actives', 'generation']")
    if "generation" not in obj:
        raise _fail(where, 'missing "generation": the generation that assignment made')
    actives = {
        _member_key(member_id): _partitions(parts, f"{where}.actives.{member_id}", topics)
        for member_id, parts in sorted(_obj(obj.get("actives", {}), f"{where}.actives").items())
    }
    return LastAssignment(_int(obj["generation"], f"{where}.generation", 0), actives)


def _member_key(member_id: Any) -> str:
    if not isinstance(member_id, str) or not member_id:
        raise _fail(
            "last_assignment.actives", f"member ids must be non-empty strings, got {member_id!r}"
        )
    return member_id


def _str_key(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise _fail(where, f"topic names must be non-empty strings, got {name!r}")
    return name


def render_assignment(result: Assignment) -> dict[str, Any]:
    """The JSON form of an :class:`Assignment` (see docs/assignment.rst)."""
    return {
        "assignment": {
            member_id: {
                "actives": {t: list(p) for t, p in owned.actives.items()},
                "standbys": {t: list(p) for t, p in owned.standbys.items()},
                "warmups": {t: list(p) for t, p in owned.warmups.items()},
            }
            for member_id, owned in result.members.items()
        },
        "generation": result.generation,
        "stats": dict(result.stats),
    }


def assign_document(doc: Any) -> dict[str, Any]:
    """Assign a group-state document; return the assignment document.

    The same as ``render_assignment(assign(parse_group_state(doc)))``, rendered
    straight from the placement (no frozen values in between). The result is
    JSON-ready and read-only: the topics of one co-partitioned group share one
    partition list per member, and so do members reading a global changelog
    (copy a list before changing it).

    Raises :class:`InvalidGroupStateError` (or its sibling
    :class:`CopartitioningError`) with a message naming the bad field.
    """
    placed = place(_parse(doc, share=True))  # the state does not outlive this call
    tables = member_tables(placed, as_built)
    check_handovers(placed, tables)
    return {
        "assignment": {
            member.id: {
                "actives": tables.actives[m],
                "standbys": tables.standbys[m],
                "warmups": tables.warmups[m],
            }
            for m, member in enumerate(placed.members)
        },
        "generation": placed.generation,
        "stats": dict(placed.stats),
    }
