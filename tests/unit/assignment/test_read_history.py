"""read_history's decisions one by one: fencing claims by generation, which reports
count, warm-up and standby holders, and lag over several changelogs."""

from __future__ import annotations

from typing import Any

from streamjoin.assignment.fencing import NO_OWNER, read_history
from streamjoin.assignment.model import MemberState, TaskGroup

#: one stateful group (two co-partitioned topics, one changelog, 4 partitions)
JOIN = TaskGroup(0, ("clk", "imp"), 4, ("imp-changelog",), (0, 1, 2))


def _member(i: int, **report: Any) -> MemberState:
    return MemberState(id=f"m{i}", topics=(), host=f"h{i}", **report)


def test_a_newer_generation_fences_every_claimant_of_a_contested_task() -> None:
    members = [
        _member(0, generation=3, actives={"imp": [0]}),
        _member(1, generation=3, actives={"imp": [0]}),
        _member(2, generation=4, actives={"imp": [0]}),
    ]
    history = read_history(members, [JOIN])
    assert history.owner == ([2, NO_OWNER, NO_OWNER, NO_OWNER],)
    assert history.contested == frozenset() and history.fenced == 2
    assert history.former == {}  # a contested claim never owned the task


def test_a_contested_task_has_no_owner_and_every_claim_counts_as_fenced() -> None:
    members = [_member(i, generation=5, actives={"imp": [1]}) for i in range(3)]
    history = read_history(members, [JOIN])
    assert history.owner == ([NO_OWNER] * 4,)
    assert history.contested == frozenset({(0, 1)}) and history.fenced == 3
    assert history.owned == 0


def test_an_older_claim_is_fenced_and_its_member_a_former_owner_in_either_order() -> None:
    members = [
        _member(0, generation=2, actives={"imp": [0, 1]}),
        _member(1, generation=6, actives={"imp": [1, 2]}),
        _member(2, generation=1, actives={"imp": [2]}),
    ]
    history = read_history(members, [JOIN])
    assert history.owner == ([0, 1, 1, NO_OWNER],)
    assert history.fenced == 2 and history.former == {(0, 1): (0,), (0, 2): (2,)}
    assert history.owned == 3


def test_claims_merge_over_a_groups_topics_and_ignore_what_the_group_lacks() -> None:
    members = [
        _member(0, generation=1, actives={"imp": [0, 9, -1], "clk": [1], "other": [2]}),
        # no generation: it claims nothing
        _member(1, actives={"imp": [3]}),
        # not eligible for the group: its claim is not read at all
        _member(2, generation=9, actives={"imp": [0, 1, 2, 3]}),
    ]
    only_0_1 = TaskGroup(0, ("clk", "imp"), 4, ("imp-changelog",), (0, 1))
    history = read_history(members, [only_0_1])
    assert history.owner == ([0, 0, NO_OWNER, NO_OWNER],)
    assert history.fenced == 0


def test_warmups_count_from_the_latest_generation_and_only_with_one_holder() -> None:
    members = [
        _member(0, generation=4, warmups={"imp-changelog": [0, 1]}),
        _member(1, generation=4, warmups={"imp-changelog": [1, 2, 7]}),
        _member(2, generation=3, warmups={"imp-changelog": [3]}),  # stale
        _member(3, generation=4, warmups={"imp-changelog": [3]}),  # not eligible
    ]
    history = read_history(members, [JOIN])
    assert history.warmup_holder == {(0, 0): 0, (0, 2): 1}


def test_standby_holders_are_eligible_sorted_and_counted_once_per_member() -> None:
    stateless = TaskGroup(1, ("views",), 2, (), (0, 1, 2))
    members = [
        _member(0, standbys={"imp": [0], "clk": [0, 1], "views": [0]}),
        _member(1, standbys={"imp": [0, 5]}),
        _member(2, standbys={"imp": [1]}),
        _member(3, standbys={"imp": [2]}),  # not eligible
    ]
    history = read_history(members, [JOIN, stateless])
    # member 0 lists task 0 under both topics: it holds it once; "views" has no state
    assert dict(history.standby_holders) == {(0, 0): [0, 1], (0, 1): [0, 2]}


def test_lag_over_several_changelogs_counts_members_that_reported_all_of_them() -> None:
    two = TaskGroup(0, ("imp",), 2, ("a-changelog", "b-changelog"), (0, 1, 2))
    members = [
        _member(0, offsets={"a-changelog": {0: 10}, "b-changelog": {0: 5}}),
        _member(1, offsets={"a-changelog": {0: 7}, "b-changelog": {0: 6, 1: 3}}),
        _member(2, offsets={"a-changelog": {0: 10}}),  # b's offset missing
    ]
    history = read_history(members, [two])
    assert history.warm.get((0, 0)) == ((1, 0), (3, 1))  # (lag, member), best first
    assert history.warm.get((0, 1)) is None and history.warm.reported((0, 1))
    assert history.warm.is_caught_up((0, 0), 1, 3) and not history.warm.is_caught_up((0, 0), 2, 9)
