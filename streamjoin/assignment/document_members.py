"""Members of a group-state document: checked one by one, or in bulk.

The checks behind :func:`streamjoin.assignment.document.parse_group_state`:
small validators that name the offending field, the member-by-member parser,
and the bulk parser that checks the common shape of thousands of members in
a few passes (and falls back to the member-by-member one to name a problem).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from streamjoin.assignment.errors import InvalidGroupStateError
from streamjoin.assignment.model import MemberState

_MEMBER_KEYS = frozenset(
    {
        "id",
        "topics",
        "host",
        "rack",
        "capacity",
        "cooperative",
        "generation",
        "actives",
        "standbys",
        "warmups",
        "offsets",
    }
)


#: what a partition key of ``offsets`` may be: a decimal string (JSON's object keys)
#: or, from Python, an integer (never a float or bool, which int() would truncate)
_KEY_TYPES = frozenset({str, int})


def _fail(where: str, problem: str) -> InvalidGroupStateError:
    return InvalidGroupStateError(f"{where}: {problem}")


def _int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(where, f"expected an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise _fail(where, f"must be at least {minimum}, got {value}")
    return value


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(where, f"expected a JSON object, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, f"expected a JSON array, got {type(value).__name__}")
    return value


def _topic(value: Any, where: str, topics: Mapping[str, int]) -> str:
    if not isinstance(value, str):
        raise _fail(where, f"expected a topic name, got {value!r}")
    if value not in topics:
        raise _fail(where, f'unknown topic {value!r}; declare its partition count under "topics"')
    return value


def _topic_list(value: Any, where: str, topics: Mapping[str, int]) -> tuple[str, ...]:
    items = _list(value, where)
    if set(map(type, items)) <= {str} and topics.keys() >= set(items):
        return tuple(items)  # the common case, checked at C speed
    return tuple(_topic(t, f"{where}[{i}]", topics) for i, t in enumerate(items))


def _all_ints(items: Any, minimum: int) -> bool:
    """Fast check (the common case); the slow path below names the culprit."""
    values = list(items)
    return not values or (set(map(type, values)) == {int} and min(values) >= minimum)


def _frozen_partitions(obj: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Topic -> sorted, distinct partitions, for lists already checked (or checked after)."""
    return {t: tuple(v) if len(v) < 2 else tuple(sorted(set(v))) for t, v in obj.items()}


def _int_keys(obj: Mapping[str, Any]) -> dict[str, dict[int, Any]]:
    """Topic -> partition -> offset with the partition keys made integers.

    Only string keys (JSON's) are converted: with an explicit base, int()
    raises TypeError on anything else (ints from Python, floats, bools),
    which the callers' slower paths then check one by one.
    """
    result: dict[str, dict[int, Any]] = {}
    for topic, by_p in obj.items():  # plain loops: no comprehension frame per topic
        converted = result[topic] = {}
        for k, offset in by_p.items():
            converted[int(k, 10)] = offset
    return result


def _partitions(value: Any, where: str, topics: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    obj = _obj(value, where)
    lists = list(obj.values())
    if (
        topics.keys() >= obj.keys()
        and set(map(type, lists)) <= {list}
        and _all_ints(itertools.chain.from_iterable(lists), 0)
    ):  # the common case, checked in bulk
        return _frozen_partitions(obj)
    result: dict[str, tuple[int, ...]] = {}
    for topic, parts in obj.items():
        _topic(topic, f"{where}", topics)
        items = _list(parts, f"{where}.{topic}")
        for i, p in enumerate(items):
            _int(p, f"{where}.{topic}[{i}]", 0)
        result[topic] = tuple(sorted(set(items)))
    return result


def _offsets(value: Any, where: str, topics: Mapping[str, int]) -> dict[str, dict[int, int]]:
    obj = _obj(value, where)
    if topics.keys() >= obj.keys() and set(map(type, obj.values())) <= {dict}:
        try:  # the common case, checked in bulk (keys other than strings raise)
            fast = _int_keys(obj)
        except (TypeError, ValueError):
            fast = None
        if (
            fast is not None
            and all(len(fast[t]) == len(obj[t]) for t in obj)
            and _all_ints(itertools.chain.from_iterable(fast.values()), 0)
            and _all_ints(itertools.chain.from_iterable(d.values() for d in fast.values()), -1)
        ):
            return fast
    result: dict[str, dict[int, int]] = {}
    for topic, by_partition in _obj(value, where).items():
        _topic(topic, where, topics)
        raw = _obj(by_partition, f"{where}.{topic}")
        try:
            parsed = {int(key): offset for key, offset in raw.items()}
        except (TypeError, ValueError):
            parsed = {}
        if (
            not set(map(type, raw)) <= _KEY_TYPES
            or len(parsed) != len(raw)
            or not (_all_ints(parsed, 0) and _all_ints(parsed.values(), -1))
        ):
            parsed = {}
            for key, offset in raw.items():
                try:
                    if type(key) not in _KEY_TYPES:
                        raise TypeError(key)
                    p = int(key)
                except (TypeError, ValueError):
                    raise _fail(
                        f"{where}.{topic}", f"partition keys must be integers, got {key!r}"
                    ) from None
                parsed[_int(p, f"{where}.{topic}", 0)] = _int(offset, f"{where}.{topic}.{key}", -1)
        result[topic] = parsed
    return result


def _subscription(
    value: Any, where: str, topics: Mapping[str, int], seen: dict[tuple[Any, ...], tuple[str, ...]]
) -> tuple[str, ...]:
    """The sorted topics a member subscribes to.

    Members mostly subscribe to the same topics: each distinct list is checked
    and sorted once (``seen``), and members that are alike share one tuple.
    """
    key = tuple(value) if isinstance(value, list) else None
    if key is not None:
        try:
            found = seen.get(key)
        except TypeError:  # an unhashable item: the checks below name it
            key = found = None
        if found is not None:
            return found
    subscribed = tuple(sorted(set(_topic_list(value, where, topics))))
    if not subscribed:
        raise _fail(where, "the member subscribes to nothing; give it at least one topic")
    if key is not None:
        seen[key] = subscribed
    return subscribed


def _member(
    value: Any,
    where: str,
    topics: Mapping[str, int],
    seen: dict[tuple[Any, ...], tuple[str, ...]],
) -> MemberState:
    doc = _obj(value, where)
    unknown = sorted(set(doc) - _MEMBER_KEYS)
    if unknown:
        raise _fail(where, f"unknown field(s) {unknown}; allowed: {sorted(_MEMBER_KEYS)}")
    if "id" not in doc or not isinstance(doc["id"], str) or not doc["id"]:
        raise _fail(f"{where}.id", "every member needs a non-empty string id")
    member_id = doc["id"]
    where = f"{where} ({member_id})"
    if "topics" not in doc:
        raise _fail(where, 'missing "topics": list the topics this member subscribes to')
    subscribed = _subscription(doc["topics"], f"{where}.topics", topics, seen)
    host = doc.get("host", member_id)
    if not isinstance(host, str) or not host:
        raise _fail(f"{where}.host", f"expected a non-empty string, got {host!r}")
    rack = doc.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise _fail(f"{where}.rack", f"expected a string or null, got {rack!r}")
    generation = doc.get("generation")
    cooperative = doc.get("cooperative", False)
    if type(cooperative) is not bool:
        raise _fail(f"{where}.cooperative", f"expected true or false, got {cooperative!r}")
    return MemberState(
        id=member_id,
        topics=subscribed,
        host=host,
        rack=rack,
        capacity=_int(doc.get("capacity", 1), f"{where}.capacity", 1),
        generation=None if generation is None else _int(generation, f"{where}.generation", 0),
        actives=_partitions(doc.get("actives", {}), f"{where}.actives", topics),
        standbys=_partitions(doc.get("standbys", {}), f"{where}.standbys", topics),
        offsets=_offsets(doc.get("offsets", {}), f"{where}.offsets", topics),
        warmups=_partitions(doc.get("warmups", {}), f"{where}.warmups", topics),
        cooperative=cooperative,
    )


# long because: the fast path in one piece: one loop whose checks mirror _member's field
# for field, then the whole-document checks that hold only with what the loop collected
def _members_in_bulk(
    raw_members: list[Any],
    topics: Mapping[str, int],
    seen: dict[tuple[Any, ...], tuple[str, ...]],
    share: bool,
) -> tuple[MemberState, ...] | None:
    """All members, built the fast way: the common shape checked per member,
    partition numbers and offsets checked once for the whole document.

    Returns None as soon as anything is not plainly valid; the caller then
    parses member by member, which names the first problem. Valid input gives
    exactly what that slow path gives, except that with ``share`` a
    topic -> partitions object whose lists hold at most one partition each is
    used as given (no tuples): only for callers that drop the state before
    the document can change.
    """
    lists: list[Any] = []  # every partition list
    raw_offsets: list[Any] = []  # every partition -> offset object, as given
    offsets: list[dict[int, Any]] = []  # the same, keys made integers
    members: list[MemberState] = []
    keys = topics.keys()
    last_topics: list[Any] | None = None
    last_subscribed: tuple[str, ...] = ()
    try:
        for doc in raw_members:
            if type(doc) is not dict or not doc.keys() <= _MEMBER_KEYS:
                return None
            member_id = doc.get("id")
            raw_topics = doc.get("topics")
            if type(member_id) is not str or not member_id or type(raw_topics) is not list:
                return None
            if raw_topics is not last_topics:  # members often share one list object
                last_topics = raw_topics
                last_subscribed = seen.get(tuple(raw_topics)) or _subscription(
                    raw_topics, "", topics, seen
                )
            subscribed = last_subscribed
            host = doc.get("host", member_id)
            rack = doc.get("rack")
            capacity = doc.get("capacity", 1)
            generation = doc.get("generation")
            cooperative = doc.get("cooperative", False)
            if (
                type(cooperative) is not bool
                or type(host) is not str
                or not host
                or not (rack is None or type(rack) is str)
                or type(capacity) is not int
                or capacity < 1
                or not (generation is None or (type(generation) is int and generation >= 0))
            ):
                return None
            parts: list[dict[str, tuple[int, ...]]] = []
            for field in ("actives", "standbys", "warmups"):
                obj = doc.get(field)
                if obj is None and field not in doc:
                    parts.append({})
                    continue
                if type(obj) is not dict or not keys >= obj.keys():
                    return None
                values = obj.values()
                lists.extend(values)
                if share and (not values or max(map(len, values)) < 2):
                    parts.append(obj)  # already sorted and distinct
                else:
                    parts.append(_frozen_partitions(obj))
            by_topic = doc.get("offsets", {})
            if type(by_topic) is not dict or not keys >= by_topic.keys():
                return None
            reported = _int_keys(by_topic)
            raw_offsets.extend(by_topic.values())
            offsets.extend(reported.values())
            members.append(
                MemberState(
                    id=member_id,
                    topics=subscribed,
                    host=host,
                    rack=rack,
                    capacity=capacity,
                    generation=generation,
                    actives=parts[0],
                    standbys=parts[1],
                    offsets=reported,
                    warmups=parts[2],
                    cooperative=cooperative,
                )
            )
    except (TypeError, ValueError, AttributeError, InvalidGroupStateError):
        return None
    if (
        set(map(type, lists)) <= {list}
        and set(map(type, raw_offsets)) <= {dict}
        and sum(map(len, raw_offsets)) == sum(map(len, offsets))
        and _all_ints(itertools.chain.from_iterable(lists), 0)
        and min(itertools.chain.from_iterable(offsets), default=0) >= 0  # int() made them
        and _all_ints(itertools.chain.from_iterable(map(dict.values, raw_offsets)), -1)
    ):
        return tuple(members)
    return None
