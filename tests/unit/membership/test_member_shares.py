"""The leader's translation of the core's assignment into per-member shares, and member settings."""

from __future__ import annotations

import pytest

from streamjoin.assignment import assign
from streamjoin.membership.group_state import JoinedMember, build_group_state
from streamjoin.membership.settings import MemberSettings, MemberSettingsError
from streamjoin.membership.shares import member_shares
from streamjoin.membership.userdata import MemberInfo, decode_assignment, encode_assignment

PARTITIONS = {"imp": 4, "clk": 4, "state-changelog": 4, "global-changelog": 2}


def _joined(kafka_id: str, stable: str) -> JoinedMember:
    info = MemberInfo(id=stable, url=f"http://{stable}:1", host=stable)
    return JoinedMember(kafka_id, tuple(sorted(PARTITIONS)), info)


def _shares(
    standbys: int = 1, joined: list[JoinedMember] | None = None
) -> tuple[dict, object]:
    if joined is None:
        joined = [_joined("k-b", "b"), _joined("k-a", "a"), _joined("k-c", "c")]
    state, kafka_ids = build_group_state(
        joined,
        PARTITIONS,
        copartition=[("imp", "clk", "state-changelog")],
        changelogs=["state-changelog"],
        global_changelogs=["global-changelog"],
        standby_replicas=standbys,
    )
    result = assign(state)
    urls = {j.member_id: j.info.url for j in joined if j.info}
    shares = member_shares(
        result,
        kafka_ids,
        urls,
        PARTITIONS,
        unrouted=["global-changelog"],
        members=["k-a", "k-b", "k-c", "k-late"],
    )
    return shares, result


def test_every_partition_routes_to_the_member_that_has_it_active() -> None:
    shares, _ = _shares()
    assert set(shares) == {"k-a", "k-b", "k-c", "k-late"}
    info = shares["k-a"].info
    assert info.urls == ("http://a:1", "http://b:1", "http://c:1")  # by stable id
    assert "global-changelog" not in info.routes
    for topic in ("imp", "clk", "state-changelog"):
        owners = info.routes[topic]
        assert len(owners) == 4 and -1 not in owners
        for partition, index in enumerate(owners):
            owner = "abc"[index]
            assert partition in shares[f"k-{owner}"].info.actives[topic]
    # every member sees the same routing table and groups
    seen = {(tuple(sorted(s.info.routes.items())), s.info.generation) for s in shares.values()}
    assert len(seen) == 1


def test_the_protocol_assignment_is_actives_and_standbys_together() -> None:
    shares, _ = _shares()
    for member_id in ("k-a", "k-b", "k-c"):
        share = shares[member_id]
        fetched = dict(share.partitions)
        assert list(fetched) == sorted(fetched)
        for topic in set(share.info.actives) | set(share.info.standbys):
            union = set(share.info.actives.get(topic, ())) | set(share.info.standbys.get(topic, ()))
            assert fetched[topic] == tuple(sorted(union))
        assert not set(share.info.actives.get("state-changelog", ())) & set(
            share.info.standbys.get("state-changelog", ())
        )
    total_standbys = sum(len(s.info.standbys.get("state-changelog", ())) for s in shares.values())
    assert total_standbys == 4


def test_a_member_the_core_gave_nothing_gets_an_empty_share_with_routes() -> None:
    shares, _ = _shares()
    late = shares["k-late"]
    assert late.partitions == () and late.info.actives == {} and late.info.standbys == {}
    assert late.info.routes == shares["k-a"].info.routes
    decoded = decode_assignment(encode_assignment(late.info))
    assert decoded is not None and decoded.routes == late.info.routes


def test_member_settings_from_env_and_overrides() -> None:
    env = {
        "STREAMJOIN_RACK": "r1",
        "STREAMJOIN_CAPACITY": "3",
        "STREAMJOIN_RECOVERY_LAG": "0",
        "STREAMJOIN_HOST_LABEL": "",
    }
    settings = MemberSettings.from_env(env)
    assert settings == MemberSettings(rack="r1", capacity=3, recovery_lag=0)
    assert settings.overridden(rack="r2", capacity=None).rack == "r2"
    assert settings.overridden(rack="r2").capacity == 3
    assert MemberSettings.from_env({}) == MemberSettings()


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"STREAMJOIN_CAPACITY": "two"}, "STREAMJOIN_CAPACITY='two'"),
        ({"STREAMJOIN_CAPACITY": "0"}, "capacity must be >= 1"),
        ({"STREAMJOIN_RECOVERY_LAG": "-1"}, "recovery lag must be >= 0"),
    ],
)
def test_bad_member_settings_say_which_and_why(env: dict[str, str], needle: str) -> None:
    with pytest.raises(MemberSettingsError, match=needle):
        MemberSettings.from_env(env)


def test_every_assigned_topic_has_a_task_group_global_changelogs_included() -> None:
    shares, result = _shares()
    groups = shares["k-a"].info.groups
    assert set(groups) == set(PARTITIONS)
    task_groups = {g.index for g in result.groups}
    assert groups["global-changelog"] not in task_groups


def test_an_empty_group_gets_empty_shares_at_its_generation() -> None:
    from streamjoin.membership.shares import empty_shares

    shares = empty_shares(7, ["k-b", "k-a"])
    assert list(shares) == ["k-a", "k-b"]
    for share in shares.values():
        assert share.partitions == () and share.info.generation == 7
        assert share.info.actives == {} and share.info.routes == {}


def test_a_global_changelog_is_every_members_active_and_standby_as_faust_gives_it() -> None:
    shares, _ = _shares()
    for member_id in ("k-a", "k-b", "k-c"):
        info = shares[member_id].info
        assert info.actives["global-changelog"] == [0, 1]
        assert info.standbys["global-changelog"] == [0, 1]
        assert dict(shares[member_id].partitions)["global-changelog"] == (0, 1)


def test_warmups_reach_the_member_and_its_consumer_fetches_them() -> None:
    """A fresh member next to a caught-up one: its share is warm-ups, fetched like standbys."""
    offsets = {"state-changelog": {p: 900 for p in range(4)}}
    every = {t: [0, 1, 2, 3] for t in ("imp", "clk", "state-changelog")}
    old = MemberInfo(
        id="a", url="http://a:1", host="a", generation=3, actives=every, offsets=offsets
    )
    joined = [JoinedMember("k-a", tuple(sorted(PARTITIONS)), old), _joined("k-b", "b")]
    shares, _ = _shares(standbys=0, joined=joined)
    b = shares["k-b"]
    assert b.info.actives.get("imp", []) == []
    assert b.info.warmups == {"state-changelog": [0, 1]} or b.info.warmups == {
        "state-changelog": [2, 3]
    }
    fetched = dict(b.partitions)
    assert set(b.info.warmups["state-changelog"]) <= set(fetched["state-changelog"])
    decoded = decode_assignment(encode_assignment(b.info))
    assert decoded is not None and decoded.warmups == b.info.warmups


def test_member_settings_read_the_warmup_cap() -> None:
    assert MemberSettings.from_env({}).max_warmup_replicas is None
    assert MemberSettings.from_env({"STREAMJOIN_MAX_WARMUP_REPLICAS": "0"}).max_warmup_replicas == 0
    with pytest.raises(MemberSettingsError, match="MAX_WARMUP"):
        MemberSettings.from_env({"STREAMJOIN_MAX_WARMUP_REPLICAS": "many"})
    with pytest.raises(MemberSettingsError, match="warm-up"):
        MemberSettings(max_warmup_replicas=-1)


def test_the_group_state_keeps_the_partition_racks_of_known_topics_of_the_right_count() -> None:
    racks = {
        "imp": (("a",), ("a", "b"), (), ("c",)),
        "clk": (("a",), ("b",)),  # 2 racks for 4 partitions: the metadata changed meanwhile
        "gone": (("a",),),  # the cluster does not know it
    }
    state, _ = build_group_state([_joined("k-a", "a")], PARTITIONS, partition_racks=racks)
    assert dict(state.partition_racks) == {"imp": racks["imp"]}
    assert dict(state.partition_weights) == {}
    assert (state.rack_traffic_cost, state.rack_move_cost) == (10, 1)  # the model's defaults
    unset, _ = build_group_state([_joined("k-a", "a")], PARTITIONS)
    assert dict(unset.partition_racks) == {}


def test_member_settings_read_the_rack_costs_whose_defaults_are_the_cores() -> None:
    from streamjoin.assignment.model import GroupState

    default = MemberSettings.from_env({})
    core = GroupState(topics={}, members=())
    assert (default.rack_traffic_cost, default.rack_move_cost) == (
        core.rack_traffic_cost,
        core.rack_move_cost,
    )
    env = {"STREAMJOIN_RACK_TRAFFIC_COST": "0", "STREAMJOIN_RACK_MOVE_COST": "4"}
    settings = MemberSettings.from_env(env)
    assert (settings.rack_traffic_cost, settings.rack_move_cost) == (0, 4)
    assert settings.overridden(rack_traffic_cost=7).rack_traffic_cost == 7
    assert settings.overridden(rack_traffic_cost=7).rack_move_cost == 4
    with pytest.raises(MemberSettingsError, match="STREAMJOIN_RACK_MOVE_COST='cheap'"):
        MemberSettings.from_env({"STREAMJOIN_RACK_MOVE_COST": "cheap"})
    with pytest.raises(MemberSettingsError, match="rack traffic cost must be an integer >= 0"):
        MemberSettings(rack_traffic_cost=-1)
    state, _ = build_group_state(
        [_joined("k-a", "a")], PARTITIONS, rack_traffic_cost=0, rack_move_cost=4
    )
    assert (state.rack_traffic_cost, state.rack_move_cost) == (0, 4)
