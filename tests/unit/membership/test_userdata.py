"""Member and assignment userdata: round trips, versions, garbage, size."""

from __future__ import annotations

import zlib

from hypothesis import given
from hypothesis import strategies as st

from streamjoin.assignment import assign
from streamjoin.membership.group_state import JoinedMember, build_group_state
from streamjoin.membership.userdata import (
    AssignmentInfo,
    MemberInfo,
    decode_assignment,
    decode_member,
    encode_assignment,
    encode_member,
    from_ranges,
    to_ranges,
)

INFO = MemberInfo(
    id="worker-1",
    url="http://host-a:6066",
    host="host-a",
    rack="zone-1",
    capacity=2,
    generation=7,
    actives={"imp": [0, 1, 2, 7], "clk": [0, 1, 2, 7]},
    standbys={"imp-changelog": [5]},
    offsets={"imp-changelog": {5: 1200}},
)


@given(st.sets(st.integers(0, 5000)))
def test_ranges_round_trip(parts: set[int]) -> None:
    assert from_ranges(to_ranges(parts)) == sorted(parts)


def test_member_round_trip_current_version() -> None:
    assert decode_member(encode_member(INFO)) == INFO


def test_previous_version_decodes_without_the_newer_fields() -> None:
    old = MemberInfo(
        id="w", url="http://w:1", host="w", generation=3, actives={"a": [1]}, version=1
    )
    decoded = decode_member(encode_member(old))
    assert decoded is not None and decoded.version == 1
    assert decoded.actives == {"a": [1]} and decoded.generation == 3
    assert decoded.offsets == {} and decoded.capacity == 1


def test_garbage_and_unknown_versions_decode_to_none() -> None:
    good = encode_member(INFO)
    assert decode_member(b"") is None
    assert decode_member(b"\x80\x04pickle") is None
    assert decode_member(good[:10]) is None
    assert decode_member(good[:3] + bytes([9]) + good[4:]) is None  # version 9
    bad_body = good[:4] + zlib.compress(b'{"id": 5}')
    assert decode_member(bad_body) is None
    assert decode_member(encode_assignment(_assignment())) is None  # wrong kind


def _assignment() -> AssignmentInfo:
    return AssignmentInfo(
        generation=8,
        actives={"imp": [0, 1]},
        standbys={"imp-changelog": [5]},
        urls=("http://a:1", "http://b:2"),
        routes={"imp-changelog": (0, 0, 1, 1, -1)},
    )


def test_assignment_round_trip_and_route_map() -> None:
    info = _assignment()
    decoded = decode_assignment(encode_assignment(info))
    assert decoded is not None
    assert decoded.route_map() == {
        "http://a:1": {"imp-changelog": [0, 1]},
        "http://b:2": {"imp-changelog": [2, 3]},
    }
    assert decode_assignment(b"junk") is None


def test_routing_table_grows_linearly_with_the_group() -> None:
    def size(members: int) -> int:
        urls = tuple(f"http://worker-{i}.example:6066" for i in range(members))
        owners = tuple(i % members for i in range(64))
        info = AssignmentInfo(8, {"imp": [0]}, {}, urls, {"imp-changelog": owners})
        return len(encode_assignment(info))

    small, large = size(10), size(1000)
    # 100x the members: the urls list grows ~100x, nothing grows with members^2
    assert large < 100 * small


def test_group_state_uses_stable_ids_and_fresh_members_for_garbage() -> None:
    joined = [
        JoinedMember(
            "kafka-b", ("imp", "clk", "imp-changelog"), decode_member(encode_member(INFO))
        ),
        JoinedMember("kafka-a", ("imp", "clk", "imp-changelog"), decode_member(b"garbled")),
        # same stable id again (copied data directory): joins fresh
        JoinedMember("kafka-c", ("imp", "clk", "imp-changelog"), INFO),
    ]
    state, ids = build_group_state(
        joined,
        {"imp": 8, "clk": 8, "imp-changelog": 8},
        copartition=[["imp", "clk"]],
        changelogs=["imp-changelog"],
        standby_replicas=1,
    )
    assert ids == {"kafka-a": "kafka-a", "kafka-c": "kafka-c", "worker-1": "kafka-b"}
    result = assign(state)
    # worker-1 keeps its claimed tasks, capacity 2 of 4 -> 4 tasks
    assert set(result.members["worker-1"].actives["imp"]) >= {0, 1, 2, 7}
    assert sum(len(m.actives["imp"]) for m in result.members.values()) == 8


def test_warmups_round_trip_both_ways_and_stay_optional() -> None:
    member = MemberInfo(
        id="w", url="http://w:1", host="w", generation=4, warmups={"imp-changelog": [2, 3]}
    )
    assert decode_member(encode_member(member)) == member
    plain = decode_member(encode_member(INFO))
    assert plain is not None and plain.warmups == {}
    info = AssignmentInfo(
        generation=8,
        actives={},
        standbys={},
        urls=("http://a:1",),
        routes={"imp-changelog": (0, 0, 0, 0)},
        warmups={"imp-changelog": [1]},
    )
    decoded = decode_assignment(encode_assignment(info))
    assert decoded is not None and decoded.warmups == {"imp-changelog": [1]}
    assert decode_assignment(encode_assignment(_assignment())).warmups == {}  # type: ignore[union-attr]


def test_the_cooperative_flag_round_trips_reaches_the_core_and_stays_optional() -> None:
    kept = MemberInfo(
        id="w", url="http://w:1", host="w", generation=4, actives={"imp": [0]}, cooperative=True
    )
    encoded = encode_member(kept)
    assert decode_member(encoded) == kept
    plain = decode_member(encode_member(INFO))
    assert plain is not None and plain.cooperative is False
    assert b"cooperative" not in zlib.decompress(encode_member(INFO)[4:])
    state, _ = build_group_state(
        [JoinedMember("kafka-w", ("imp",), decode_member(encoded))], {"imp": 2}
    )
    assert [m.cooperative for m in state.members] == [True]
