"""streamjoin's assignor inside real faust workers on the embedded broker.

Every worker is a ``streamjoin worker`` subprocess running
``tests/integration/apps/assigned.py`` (``totals[key] += value``, one standby).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_util import create_topic, encode, produce, read_status, run, wait_until

from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.dev.process import WorkerProcess

pytestmark = [pytest.mark.broker, pytest.mark.slow]

APPS = Path(__file__).resolve().parent
PARTITIONS = 6
SETTLE = 90.0


class Group:
    """The workers of one test; all of them are killed at teardown."""

    def __init__(self, broker: EmbeddedBroker, tmp_path: Path, app_id: str) -> None:
        self.broker = broker
        self.tmp_path = tmp_path
        self.app_id = app_id
        self.workers: dict[str, WorkerProcess] = {}

    @property
    def events(self) -> str:
        return f"{self.app_id}-events"

    @property
    def changelog(self) -> str:
        return f"{self.app_id}-totals-changelog"

    def start(
        self,
        name: str,
        *,
        kind: str = "streamjoin",
        host: str | None = None,
        extra_args: tuple[str, ...] = (),
        env_extra: dict[str, str] | None = None,
    ) -> WorkerProcess:
        env = {
            "SJ_TEST_APP_ID": self.app_id,
            "SJ_TEST_PARTITIONS": str(PARTITIONS),
            "SJ_TEST_KIND": kind,
            **(env_extra or {}),
        }
        worker = self.workers.get(name)
        if worker is None:
            worker = WorkerProcess(
                "apps.assigned:app",
                self.broker.url,
                self.tmp_path / name,
                self.tmp_path / f"{name}.log",
                env=env,
                cwd=APPS,
                extra_args=("--host-label", host or f"host-{name}", *extra_args),
            )
            self.workers[name] = worker
        return worker.start()

    def status(self, name: str) -> dict[str, Any] | None:
        return read_status(self.tmp_path / name)

    def settled(self, names: list[str], min_generation: int = 0) -> dict[str, Any] | None:
        """Statuses of *names* once they agree on a generation and cover every task."""
        statuses = {}
        for name in names:
            status = self.status(name)
            if status is None or not self.workers[name].running():
                return None
            statuses[name] = status
        generations = {s["assignor"]["generation"] for s in statuses.values()}
        if len(generations) != 1 or None in generations or min(generations) < min_generation:
            return None
        owned = [
            p for s in statuses.values() for p in s["assignor"]["actives"].get(self.events, [])
        ]
        if sorted(owned) != list(range(PARTITIONS)):
            return None
        return statuses

    def wait_settled(self, names: list[str], min_generation: int = 0) -> dict[str, Any]:
        return wait_until(lambda: self.settled(names, min_generation), SETTLE, f"{names} to settle")

    def kill_all(self) -> None:
        for worker in self.workers.values():
            worker.kill()


@pytest.fixture
def group(
    broker: EmbeddedBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Group]:
    app_id = "sja-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:36]
    run(create_topic(broker.bootstrap, f"{app_id}-events", PARTITIONS))
    g = Group(broker, tmp_path, app_id)
    try:
        yield g
    finally:
        g.kill_all()


def actives(statuses: dict[str, Any], topic: str) -> dict[str, set[int]]:
    return {n: set(s["assignor"]["actives"].get(topic, [])) for n, s in statuses.items()}


def standbys(statuses: dict[str, Any], topic: str) -> dict[str, set[int]]:
    return {n: set(s["assignor"]["standbys"].get(topic, [])) for n, s in statuses.items()}


def feed(broker: EmbeddedBroker, topic: str, n: int, start: int = 0) -> None:
    records = [(encode(f"k{i % 60}"), encode(1), None) for i in range(start, start + n)]
    run(produce(broker.bootstrap, topic, records))


def test_a_joining_worker_warms_up_then_gets_its_share_with_the_fewest_moves(
    group: Group,
) -> None:
    """faust issue #93 (a new worker got no tasks) and H1/H2/H4: the new worker's
    share first arrives as warm-ups while the tasks keep running warm where they
    are; once they caught up the worker asks for the follow-up rebalance itself
    and gets its tasks warm, with the fewest moves."""
    group.start("a")
    group.start("b")
    two = group.wait_settled(["a", "b"])
    before = actives(two, group.events)
    assert sorted(len(p) for p in before.values()) == [3, 3]
    feed(group.broker, group.events, 600)
    wait_until(lambda: _standbys_applied(group, ["a", "b"]) >= 600, 60, "standbys caught up")
    generation = two["a"]["assignor"]["generation"]
    group.start("c")

    def shared_out() -> dict[str, Any] | None:
        statuses = group.settled(["a", "b", "c"], generation + 2)
        if statuses and len(statuses["c"]["assignor"]["actives"].get(group.events, [])) == 2:
            return statuses
        return None

    three = wait_until(shared_out, SETTLE, "the new worker to get its share")
    after = actives(three, group.events)
    assert sorted(len(p) for p in after.values()) == [2, 2, 2]
    moved = sum(len(before[n] - after[n]) for n in before)
    assert moved == 2  # 3/3 -> 2/2/2 needs exactly two moves
    c = group.workers["c"]
    # first its two tasks as warm-ups (no active changelog partition), then the request
    warmup_line = c.wait_for_log(r"warm-ups 2 changelog partition", 5)[0]
    assert "(changelog partitions: 0 warm, 0 cold)" in warmup_line
    c.wait_for_log(r"requesting a follow-up rebalance", 5)
    # the follow-up moved them warm: c restored (almost) nothing when it took them over
    def restored() -> dict[int, int] | None:
        status = group.status("c") or {}
        counts = {p: n for t, p, n in status.get("restore_counts", []) if t == group.changelog}
        return counts if set(counts) >= after["c"] else None

    counts = wait_until(restored, 60, "c's restore counts")
    assert sum(counts[p] for p in after["c"]) < 20, counts
    # stateful tasks carry one standby, never on the active's worker
    spare = standbys(three, group.changelog)
    owned = actives(three, group.changelog)
    assert sorted(p for s in spare.values() for p in s) == list(range(PARTITIONS))
    for name in spare:
        assert not spare[name] & owned[name]


def test_without_warmups_a_joining_worker_restores_its_share_cold(group: Group) -> None:
    """``--max-warmup-replicas 0``: the old behaviour, for comparison: the new
    worker's share moves at once and is restored from the changelog. Eager
    rebalancing: a cooperative group withholds the share for a round (one
    owner at a time), and its new owner restores it as a warm-up meanwhile,
    so it never takes it cold."""
    cold = ("--max-warmup-replicas", "0")
    eager = {"STREAMJOIN_COOPERATIVE": "0"}
    group.start("a", extra_args=cold, env_extra=eager)
    group.start("b", extra_args=cold, env_extra=eager)
    two = group.wait_settled(["a", "b"])
    feed(group.broker, group.events, 600)
    wait_until(lambda: _standbys_applied(group, ["a", "b"]) >= 600, 60, "standbys caught up")
    group.start("c", extra_args=cold, env_extra=eager)
    three = group.wait_settled(["a", "b", "c"], two["a"]["assignor"]["generation"] + 1)
    taken = actives(three, group.changelog)["c"]
    assert len(taken) == 2

    def restored() -> int | None:
        status = group.status("c") or {}
        counts = {p: n for t, p, n in status.get("restore_counts", []) if t == group.changelog}
        return sum(counts[p] for p in taken) if set(counts) >= taken else None

    assert wait_until(restored, 60, "c's restore counts") >= 150  # ~100 records per task


def test_killed_workers_tasks_go_to_their_standbys_and_restore_only_the_delta(group: Group) -> None:
    group.start("a")
    group.start("b")
    group.start("c")
    first = group.wait_settled(["a", "b", "c"])
    feed(group.broker, group.events, 600)
    # standbys catch up with the changelog before the kill
    wait_until(
        lambda: _standbys_applied(group, ["a", "b", "c"]) >= 600,
        60,
        "standbys to apply the changelog",
    )
    victim_tasks = actives(first, group.changelog)["c"]
    holders = standbys(first, group.changelog)
    group.workers["c"].kill()
    after = group.wait_settled(["a", "b"], first["a"]["assignor"]["generation"] + 1)
    now = actives(after, group.changelog)
    for p in victim_tasks:
        (new_owner,) = [n for n in now if p in now[n]]
        assert p in holders[new_owner], f"task {p} went to {new_owner}, not its standby holder"

    def restored() -> dict[int, int] | None:
        counts: dict[int, int] = {}
        for name in ("a", "b"):
            status = group.status(name) or {}
            for topic, p, n in status.get("restore_counts", []):
                if topic == group.changelog and p in victim_tasks:
                    counts[p] = n
        return counts if set(counts) == victim_tasks else None

    counts = wait_until(restored, 60, "restore counts of the promoted tasks")
    # the standbys were caught up: promoting them restores (almost) nothing
    assert sum(counts.values()) < 20, counts


def _standbys_applied(group: Group, names: list[str]) -> int:
    """Changelog records the workers' standbys have applied, summed (offset + 1)."""
    total = 0
    for name in names:
        status = group.status(name) or {}
        total += sum(
            o + 1 for topic, _, o in status.get("standby_offsets", []) if topic == group.changelog
        )
    # every changelog record is on exactly one standby (1 replica): compare with records fed
    return total


def test_a_restarted_worker_gets_its_tasks_back(group: Group) -> None:
    group.start("a")
    group.start("b")
    group.start("c")
    first = group.wait_settled(["a", "b", "c"])
    feed(group.broker, group.events, 300)
    wait_until(lambda: _standbys_applied(group, ["a", "b", "c"]) >= 300, 60, "standbys caught up")
    mine = actives(first, group.events)["c"]
    member_id = first["c"]["assignor"]["member"]
    group.workers["c"].kill()
    gone = group.wait_settled(["a", "b"], first["a"]["assignor"]["generation"] + 1)
    group.start("c")
    back = group.wait_settled(["a", "b", "c"], gone["a"]["assignor"]["generation"] + 1)
    assert back["c"]["assignor"]["member"] == member_id  # identity kept in the data directory
    assert actives(back, group.events)["c"] == mine


def test_plain_faust_app_switched_by_two_settings(group: Group) -> None:
    group.start("a", kind="faust")
    group.start("b", kind="faust")
    two = group.wait_settled(["a", "b"])
    assert sorted(len(p) for p in actives(two, group.events).values()) == [3, 3]
    spare = standbys(two, group.changelog)
    assert sorted(p for s in spare.values() for p in s) == list(range(PARTITIONS))
    assert "streamjoin: rebalance generation" in group.workers["a"].log_text()


def test_no_standby_on_the_actives_host(group: Group) -> None:
    group.start("a", host="shared")
    group.start("b", host="shared")
    group.start("c", host="other")
    statuses = group.wait_settled(["a", "b", "c"])
    host = {"a": "shared", "b": "shared", "c": "other"}
    owned = actives(statuses, group.changelog)
    spare = standbys(statuses, group.changelog)
    for p in range(PARTITIONS):
        (owner,) = [n for n in owned if p in owned[n]]
        holders = [n for n in spare if p in spare[n]]
        assert len(holders) == 1
        assert host[holders[0]] != host[owner], f"task {p}: standby on the active's host"


class _ForeignMember:
    """An aiokafka group member speaking the "streamjoin" protocol with odd userdata."""

    def __init__(self, user_data: bytes) -> None:
        self.user_data = user_data
        self.assigned: list[tuple[str, list[int]]] = []

    name = "streamjoin"
    version = 1

    def metadata(self, topics: Any) -> Any:
        from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

        return ConsumerProtocolMemberMetadata(1, sorted(topics), self.user_data)

    def assign(self, cluster: Any, members: Any) -> Any:
        raise AssertionError("the foreign member must not lead the group in this test")

    def on_assignment(self, assignment: Any) -> None:
        self.assigned = [(topic, sorted(parts)) for topic, parts in assignment.assignment]


async def _join_foreign(
    group: Group, member: _ForeignMember, names: list[str], after: int
) -> dict[str, Any]:
    import asyncio
    import time

    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        group.events,
        group.changelog,
        bootstrap_servers=group.broker.bootstrap,
        group_id=group.app_id,
        enable_auto_commit=False,
        partition_assignment_strategy=(member,),
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + SETTLE
        while time.monotonic() < deadline:
            await consumer.getmany(timeout_ms=200)
            statuses = {n: group.status(n) for n in names}
            gens = {s["assignor"]["generation"] for s in statuses.values() if s}
            if member.assigned and len(gens) == 1 and min(gens) > after:
                return {"statuses": statuses, "foreign": dict(member.assigned)}
            await asyncio.sleep(0.1)
        raise TimeoutError("group with the foreign member did not settle")
    finally:
        await consumer.stop()


@pytest.mark.parametrize("kind", ["garbled", "previous-version"])
def test_garbled_or_older_userdata_never_breaks_the_group(group: Group, kind: str) -> None:
    from streamjoin.membership.userdata import MemberInfo, encode_member

    # the foreign member offers only the eager "streamjoin" protocol, as an older
    # worker does; the embedded broker refuses a member that does not offer the
    # group's current protocol (Kafka accepts it and the whole group rebalances
    # eagerly), so here the group is eager from the start
    group.start("a", env_extra={"STREAMJOIN_COOPERATIVE": "0"})
    first = group.wait_settled(["a"])
    if kind == "garbled":
        data = b"\x80\x04\x95garbage, maybe a pickle"
    else:
        data = encode_member(
            MemberInfo(id="old-worker", url="http://old:1", host="old", generation=None, version=1)
        )
    result = run(
        _join_foreign(group, _ForeignMember(data), ["a"], first["a"]["assignor"]["generation"]), 120
    )
    mine = set(result["statuses"]["a"]["assignor"]["actives"].get(group.events, []))
    theirs = set(result["foreign"].get(group.events, []))
    assert mine | theirs == set(range(PARTITIONS)) and not mine & theirs
    assert len(theirs) == PARTITIONS // 2  # a fresh member still gets its fair share
    log = group.workers["a"].log_text()
    if kind == "garbled":
        assert "joins as a fresh member" in log


def test_instance_id_is_the_members_identity(group: Group) -> None:
    group.start("a", extra_args=("--instance-id", "worker-alpha", "--rack", "zone-1"))
    group.start("b", extra_args=("--instance-id", "worker-beta", "--rack", "zone-2"))
    statuses = group.wait_settled(["a", "b"])
    assert {s["assignor"]["member"] for s in statuses.values()} == {"worker-alpha", "worker-beta"}


def test_assignment_served_on_the_web_port_and_rebalance_logged(group: Group) -> None:
    import json
    import urllib.request

    from streamjoin.dev.broker import free_port

    port = free_port()
    group.start("a", extra_args=("--with-web", "--web-port", str(port), "--web-bind", "127.0.0.1"))
    status = group.wait_settled(["a"])

    def fetch() -> dict[str, Any] | None:
        try:
            url = f"http://127.0.0.1:{port}/streamjoin/assignment/"
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())  # type: ignore[no-any-return]
        except OSError:
            return None

    served = wait_until(fetch, 30, "the assignment page")
    assert served["member"] == status["a"]["assignor"]["member"]
    assert served["actives"][group.events] == list(range(PARTITIONS))
    # streamjoin's TableManager runs: the followed changelogs' applied offsets are shown
    assert served["standby_offsets"] == {} and served["global_offsets"] == {}
    # a lone worker: no warm-ups, nothing followed, no follow-up rebalance asked for
    assert served["warmups"] == {} and served["changelog_lags"] == {}
    assert served["followup_rebalance_requests"] == 0
    lines = group.workers["a"].wait_for_log(r"streamjoin: rebalance generation \d+: actives \+", 10)
    assert "(changelog partitions:" in lines[-1]


def test_several_workers_per_host_scale_out_and_a_kill_stay_warm_and_balanced(
    group: Group,
) -> None:
    """Issue 29, with real workers: two workers per host label (4 on 2 labels),
    scale-out to 6 on 3 labels, then kill -9 of one. Every task that moves is
    taken warm (a warm-up or a standby caught up first: no cold activation
    while a caught-up copy lived), the group is balanced after the follow-up
    rebalance, and every standby is on another host than its active."""
    host = {"a": "h1", "b": "h1", "c": "h2", "d": "h2", "e": "h3", "f": "h3"}
    four = ["a", "b", "c", "d"]
    for name in four:
        group.start(name, host=host[name])
    first = group.wait_settled(four)
    feed(group.broker, group.events, 600)
    wait_until(lambda: _standbys_applied(group, four) >= 600, 60, "standbys caught up")
    generation = first["a"]["assignor"]["generation"]
    group.start("e", host=host["e"])
    group.start("f", host=host["f"])
    six = [*four, "e", "f"]

    def balanced(names: list[str], after: int) -> dict[str, Any] | None:
        statuses = group.settled(names, after)
        if statuses is None:
            return None
        counts = sorted(len(p) for p in actives(statuses, group.events).values())
        return statuses if counts[-1] - counts[0] <= 1 else None

    scaled = wait_until(lambda: balanced(six, generation + 1), SETTLE, "six to balance")
    _standbys_on_other_hosts(scaled, group.changelog, host)
    for name in ("e", "f"):  # their tasks were warmed up before they took them
        taken = actives(scaled, group.changelog)[name]
        assert len(taken) == 1
        assert sum(_restored(group, name, taken).values()) < 20, name

    wait_until(lambda: _standbys_applied(group, six) >= 600, 60, "standbys caught up again")
    victim = "f"
    orphans = actives(scaled, group.changelog)[victim]
    group.workers[victim].kill()
    five = [n for n in six if n != victim]
    after = wait_until(
        lambda: balanced(five, scaled["a"]["assignor"]["generation"] + 1), SETTLE, "five"
    )
    _standbys_on_other_hosts(after, group.changelog, host)
    now = actives(after, group.changelog)
    for p in orphans:  # taken by a caught-up copy (its standby, or an older local copy)
        (owner,) = [n for n in now if p in now[n]]
        assert sum(_restored(group, owner, {p}).values()) < 20, (p, owner)


def _restored(group: Group, name: str, tasks: set[int]) -> dict[int, int]:
    """Changelog records *name* restored for *tasks* when it took them (waits for them)."""

    def counts() -> dict[int, int] | None:
        status = group.status(name) or {}
        found = {p: n for t, p, n in status.get("restore_counts", []) if t == group.changelog}
        return {p: found[p] for p in tasks} if set(found) >= tasks else None

    found: dict[int, int] = wait_until(counts, 60, f"{name}'s restore counts")
    return found


def _standbys_on_other_hosts(
    statuses: dict[str, Any], changelog: str, host: dict[str, str]
) -> None:
    owned = actives(statuses, changelog)
    spare = standbys(statuses, changelog)
    for p in range(PARTITIONS):
        (owner,) = [n for n in owned if p in owned[n]]
        holders = [n for n in spare if p in spare[n]]
        assert len(holders) == 1, (p, holders)
        assert host[holders[0]] != host[owner], f"task {p}: standby on the active's host"
