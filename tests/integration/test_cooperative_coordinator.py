"""The cooperative coordinator (streamjoin.faust.kafka.cooperative) on the real
broker, with plain aiokafka consumers and an assignor over the pure core.

Each member consumes a topic that a producer keeps writing to, logs every
record it gets (partition, offset, wall time), commits its position of
every partition it gives up, and records its listener's calls. Checked:
nothing is revoked when a rebalance starts; a kept partition keeps its fetch
position (the offsets consumed of each partition, over all members, are each
read exactly once: no repeat, no hole); a partition that moves is given up
by its old owner before its new owner gets it (never consumed by two at
overlapping times); the old owner rejoins once the other members can have
their assignment (paced); an eager member makes the group eager; a member
that lost its membership gives everything up.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaConnectionError
from aiokafka.structs import OffsetAndMetadata
from core_assignor import CoreAssignor
from kafka_util import create_topic

from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.faust.kafka.cooperative import (
    PROTOCOL,
    REJOIN_PACE_S,
    Cooperation,
    install_cooperative,
)

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PARTITIONS = 6
#: records per partition per second the producer writes
RATE = 40
SESSION_MS = 6_000
REBALANCE_MS = 10_000


class Revocation(NamedTuple):
    """A member's listener gave *partitions* up at *at* (monotonic s)."""

    partitions: frozenset[int]
    at: float
    #: the member had lost its membership (what
    #: streamjoin.faust.kafka.incremental.rebalance_kind answers LOST for)
    membership_lost: bool
    #: the member paced its rejoins (a generation had completed without it)
    pacing: bool


@dataclass
class Member(ConsumerRebalanceListener):  # type: ignore[misc]
    name: str
    consumer: AIOKafkaConsumer
    assignor: CoreAssignor
    cooperation: Cooperation | None = None
    #: (partition, offset, monotonic s) of every record consumed
    consumed: list[tuple[int, int, float]] = field(default_factory=list)
    #: ("revoked" | "assigned", partitions, monotonic s, coordinator generation)
    calls: list[tuple[str, frozenset[int], float, int]] = field(default_factory=list)
    #: every revocation, in order, with the member's state then
    revoked_with: list[Revocation] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    async def on_partitions_revoked(self, revoked: Any) -> None:
        coordinator = self.consumer._coordinator
        self.calls.append(
            ("revoked", frozenset(tp.partition for tp in revoked), time.monotonic(),
             coordinator.generation)
        )  # fmt: skip
        cooperation = self.cooperation or Cooperation()
        self.revoked_with.append(
            Revocation(
                frozenset(tp.partition for tp in revoked),
                time.monotonic(),
                cooperation.membership_lost,
                cooperation.missed is not None,
            )
        )
        positions = {}
        for tp in revoked:
            try:
                positions[tp] = OffsetAndMetadata(await self.consumer.position(tp), "")
            except Exception:  # no position yet
                continue
        if positions:
            try:
                await self.consumer.commit(positions)
            except Exception as exc:  # a member that lost its membership cannot commit
                self.calls.append(("commit-failed", frozenset(), time.monotonic(), -1))
                print(f"{self.name}: commit on revoke failed: {exc!r}")
            else:
                parts = frozenset(tp.partition for tp in positions)
                self.calls.append(("committed", parts, time.monotonic(), coordinator.generation))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.calls.append(
            ("assigned", frozenset(tp.partition for tp in assigned), time.monotonic(),
             self.consumer._coordinator.generation)
        )  # fmt: skip

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def revoked(self) -> list[frozenset[int]]:
        return [parts for kind, parts, _, _ in self.calls if kind == "revoked" and parts]


class Group:
    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = topic + "-group"
        self.members: list[Member] = []
        self.produced: dict[int, int] = dict.fromkeys(range(PARTITIONS), 0)
        self._stop_producing = asyncio.Event()
        self._producer_task: asyncio.Task[None] | None = None

    async def join(self, name: str, *, cooperative: bool = True) -> Member:
        assignor = CoreAssignor(name)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            partition_assignment_strategy=[assignor],
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=REBALANCE_MS,
            heartbeat_interval_ms=500,
            request_timeout_ms=SESSION_MS + 4_000,
            metadata_max_age_ms=2_000,
        )
        await consumer.start()
        member = Member(name, consumer, assignor)
        if cooperative:
            member.cooperation = install_cooperative(consumer)
            assert member.cooperation is not None
        consumer.subscribe([self.topic], listener=member)
        member.task = asyncio.create_task(self._consume(member))
        self.members.append(member)
        return member

    async def _consume(self, member: Member) -> None:
        while True:
            batches = await member.consumer.getmany(timeout_ms=100)
            now = time.monotonic()
            for tp, records in batches.items():
                member.consumed.extend((tp.partition, r.offset, now) for r in records)

    async def _produce(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        await producer.start()
        try:
            deadline = time.monotonic() + 120  # bounded
            while not self._stop_producing.is_set() and time.monotonic() < deadline:
                for p in range(PARTITIONS):
                    await producer.send(self.topic, b"x", partition=p)
                    self.produced[p] += 1
                await asyncio.sleep(1 / RATE)
            await producer.flush()
        finally:
            await producer.stop()

    def start_producing(self) -> None:
        self._producer_task = asyncio.create_task(self._produce())

    async def stop_producing(self) -> None:
        self._stop_producing.set()
        if self._producer_task is not None:
            await self._producer_task

    async def until(self, what: str, predicate: Any, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: " + self.describe())
            await asyncio.sleep(0.1)

    def describe(self) -> str:
        return "; ".join(
            f"{m.name} owns {sorted(m.owned())} ({m.cooperation}) calls "
            f"{[(k, sorted(p)) for k, p, _, _ in m.calls]}"
            for m in self.members
        )

    def offsets_read(self) -> dict[int, list[int]]:
        """Per partition, every offset any member consumed (repeats included)."""
        read: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        for m in self.members:
            for p, offset, _ in m.consumed:
                read[p].append(offset)
        return read

    def drained(self) -> bool:
        """Every produced record consumed by someone."""
        read = self.offsets_read()
        return all(max(read[p], default=-1) == n - 1 for p, n in self.produced.items())

    async def leave(self, member: Member) -> None:
        """Stop *member* as a worker shuts down: stop consuming, commit, leave."""
        if member.task is not None:
            member.task.cancel()
            await asyncio.gather(member.task, return_exceptions=True)
            member.task = None
        positions = {
            tp: OffsetAndMetadata(await member.consumer.position(tp), "")
            for tp in member.consumer.assignment()
        }
        await member.consumer.commit(positions)
        await member.consumer.stop()

    async def close(self) -> None:
        await self.stop_producing()
        for m in self.members:
            if m.task is not None:
                m.task.cancel()
                await asyncio.gather(m.task, return_exceptions=True)
            await m.consumer.stop()

    def check_each_offset_read_once(self) -> None:
        """Over all members, each produced offset of each partition was consumed
        exactly once: no repeat, no hole."""
        for p, offsets in self.offsets_read().items():
            repeats = len(offsets) - len(set(offsets))
            holes = set(range(self.produced[p])) - set(offsets)
            assert repeats == 0 and not holes, (
                f"partition {p}: {repeats} offsets read twice, {len(holes)} never read "
                f"(of {self.produced[p]}): {self.describe()}"
            )


@pytest.fixture
async def group(broker: EmbeddedBroker, request: pytest.FixtureRequest) -> AsyncIterator[Group]:
    digest = hashlib.sha1(f"{request.node.name}{time.time()}".encode()).hexdigest()[:8]
    topic = f"coop-{digest}"
    await create_topic(broker.bootstrap, topic, PARTITIONS)
    grp = Group(broker.bootstrap, topic)
    try:
        yield grp
    finally:
        await grp.close()


def _gaps(member: Member, partitions: set[int], after: float) -> dict[int, float]:
    """The longest wait between two records of each partition consumed by
    *member* after *after* (monotonic s)."""
    longest = {}
    for p in sorted(partitions):
        times = [t for q, _, t in member.consumed if q == p and t >= after]
        longest[p] = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
    return longest


class Sent(NamedTuple):
    """A group request a member sent."""

    #: monotonic s when it was sent
    at: float
    #: the request's class name
    kind: str
    #: the protocols a JoinGroup offered ([] for any other request)
    protocols: list[str]
    #: its answer's error code
    code: int | None
    #: monotonic s when it was answered
    answered: float


#: error code: rebalance in progress
REBALANCE_IN_PROGRESS = 27


def _record_group_requests(
    member: Member, into: list[Sent], *, fail_first_sync: bool = False
) -> None:
    """Append every request *member*'s coordinator sends, with its answer, to
    *into*. *fail_first_sync*: the member's first SyncGroup is answered
    "rebalance in progress" (as the embedded broker answers a follower's when
    a JoinGroup comes first), whatever the broker answered."""
    coordinator = member.consumer._coordinator
    send = coordinator._send_req
    to_fail = [fail_first_sync]

    async def recording(request: Any) -> Any:
        sent = time.monotonic()
        response = await send(request)
        kind = type(request).__name__
        if kind.startswith("SyncGroup") and to_fail[0]:
            to_fail[0] = False
            response.error_code = REBALANCE_IN_PROGRESS
        names = [n for n, _ in request._group_protocols] if kind.startswith("Join") else []
        code = getattr(response, "error_code", None)
        into.append(Sent(sent, kind, names, code, time.monotonic()))
        return response

    coordinator._send_req = recording


def _follow_ups(member: Member, sent: list[Sent]) -> list[tuple[bool, float]]:
    """For each rebalance in which *member* gave a partition up: whether it paced
    its rejoins then (it had missed a generation), and the seconds from the
    answer to the SyncGroup that gave it its assignment to its next JoinGroup
    (the follow-up)."""
    out = []
    for given_up in member.revoked_with:
        if not given_up.partitions or given_up.membership_lost:
            continue
        syncs = [r for r in sent if r.kind.startswith("SyncGroup") and r.code == 0]
        synced = max((r.answered for r in syncs if r.answered <= given_up.at), default=None)
        joins = [r.at for r in sent if r.kind.startswith("JoinGroup") and r.at > given_up.at]
        if synced is not None and joins:
            out.append((given_up.pacing, min(joins) - synced))
    return out


async def test_a_joining_member_gets_its_share_while_the_kept_partitions_keep_running(
    group: Group,
) -> None:
    group.start_producing()
    first = await group.join("m1")
    await group.until("m1 owning everything", lambda: first.owned() == set(range(PARTITIONS)))
    await group.until("m1 consuming", lambda: len(first.consumed) > 100)
    assert first.cooperation is not None and first.cooperation.protocol == PROTOCOL
    joined_at = time.monotonic()
    second = await group.join("m2")
    await group.until("m2 getting its share", lambda: len(second.owned()) == PARTITIONS // 2)
    await group.until("m2 consuming", lambda: len({p for p, _, _ in second.consumed}) == 3)
    await asyncio.sleep(1.0)
    await group.stop_producing()
    await group.until("every record consumed", group.drained)

    kept, moved = first.owned(), second.owned()
    assert kept | moved == set(range(PARTITIONS)) and not kept & moved
    # nothing revoked when the rebalance started: one revocation, of the moved share only
    assert first.revoked() == [frozenset(moved)], group.describe()
    assert first.cooperation.cooperative_rebalances >= 2, first.cooperation
    # the new owner got the moved partitions only after the old one gave them up
    revoked_at = next(t for kind, p, t, _ in first.calls if kind == "revoked" and p)
    assert min(t for p, _, t in second.consumed) > revoked_at
    first_leader_made = [stats for _, stats in first.assignor.made + second.assignor.made]
    assert any(stats["withheld"] == len(moved) for stats in first_leader_made), first_leader_made
    # no repeat, no hole: kept partitions kept their positions, moved ones
    # started where their old owner stopped
    group.check_each_offset_read_once()
    gaps = _gaps(first, kept, joined_at)
    print(f"longest wait of a kept partition through both rebalances: {max(gaps.values()):.3f} s")
    assert max(gaps.values()) < 1.0, gaps


async def test_each_rebalance_sends_one_join_group_offering_every_protocol(
    group: Group,
) -> None:
    """aiokafka 0.14 sends one JoinGroup per assignor, each with the protocols so
    far: a cooperative member sent two per rebalance, the first offering only
    the cooperative protocol (the embedded broker held each for half the
    session; Kafka would start another rebalance for the second). Each
    JoinGroup now offers both, and a member sends a SyncGroup after every
    JoinGroup answered without error."""
    sent: dict[str, list[Sent]] = {"m1": [], "m2": []}

    group.start_producing()
    first = await group.join("m1")
    _record_group_requests(first, sent["m1"])
    await group.until("m1 owning everything", lambda: first.owned() == set(range(PARTITIONS)))
    second = await group.join("m2")
    _record_group_requests(second, sent["m2"])
    await group.until("a cooperative split", lambda: len(first.owned()) == len(second.owned()) == 3)
    cooperation = first.cooperation
    assert cooperation is not None
    await group.until("two cooperative rebalances", lambda: cooperation.cooperative_rebalances >= 2)
    await group.stop_producing()
    for name, requests in sorted(sent.items()):
        joins = [r for r in requests if r.kind.startswith("JoinGroup")]
        assert joins, (name, requests)
        for join in joins:
            assert join.protocols == [PROTOCOL, "faust"], (name, requests)
        steps = [
            r.kind[:4]
            for r in requests
            if r.kind.startswith("SyncGroup") or (r.kind.startswith("JoinGroup") and r.code == 0)
        ]
        # a SyncGroup after each JoinGroup answered: never two JoinGroups for one rebalance
        assert all(a != b for a, b in itertools.pairwise(steps)), (name, steps)


async def test_a_follow_up_is_sent_at_once_until_a_generation_completed_without_the_member(
    group: Group,
) -> None:
    """Kafka answers every member's SyncGroup once the leader's arrives, so a
    member that gave a partition up rejoins at once for the follow-up. The
    embedded broker answers a follower's up to about a second later, and a
    JoinGroup meanwhile fails it ("rebalance in progress"): a member that saw
    one of its SyncGroups fail paces its rejoins (REJOIN_PACE_S after its
    assignment), and the group settles.

    m1 leads from the start, m2 joins (its first SyncGroup answered "rebalance
    in progress" by the test, if the broker did not already), then m3: m1
    and m2 each give a partition up. m1's follow-ups come at once (the
    Kafka case); m2's come REJOIN_PACE_S after its assignment at the
    earliest."""
    sent: dict[str, list[Sent]] = {"m1": [], "m2": [], "m3": []}

    group.start_producing()
    first = await group.join("m1")
    _record_group_requests(first, sent["m1"])
    await group.until("m1 owning everything", lambda: first.owned() == set(range(PARTITIONS)))
    second = await group.join("m2")
    _record_group_requests(second, sent["m2"], fail_first_sync=True)
    await group.until("a split", lambda: len(first.owned()) == len(second.owned()) == 3)
    assert second.cooperation is not None and second.cooperation.missed is not None
    joined_at = time.monotonic()
    third = await group.join("m3")
    _record_group_requests(third, sent["m3"])
    await group.until(
        "a three-way split", lambda: [len(m.owned()) for m in group.members] == [2, 2, 2]
    )
    print(f"m3 joined to the three-way split: {time.monotonic() - joined_at:.1f} s")
    await asyncio.sleep(2 * REJOIN_PACE_S)  # a late rebalance would show meanwhile
    await group.stop_producing()
    await group.until("every record consumed", group.drained)
    group.check_each_offset_read_once()
    follow_ups = {m.name: _follow_ups(m, sent[m.name]) for m in (first, second)}
    print(f"follow-ups (pacing, seconds after the assignment): {follow_ups}")
    rebalances = {m.name: m.cooperation and m.cooperation.rebalances for m in group.members}
    print(f"rebalances completed: {rebalances}")
    at_once = [s for name in follow_ups for pacing, s in follow_ups[name] if not pacing]
    paced = [s for name in follow_ups for pacing, s in follow_ups[name] if pacing]
    # m1's first follow-up (m2 joining) comes before anything could fail for it
    assert follow_ups["m1"] and not follow_ups["m1"][0][0], (follow_ups, sent)
    assert any(pacing for pacing, _ in follow_ups["m2"]), (follow_ups, sent)
    assert all(s < REJOIN_PACE_S / 2 for s in at_once), (follow_ups, sent)
    assert all(s >= REJOIN_PACE_S - 0.1 for s in paced), (follow_ups, sent)


async def test_a_group_with_an_eager_member_rebalances_eagerly(
    group: Group,
) -> None:
    """The rolling upgrade: an older member (only the eager protocol) and a new one
    agree on the eager protocol, so the new one gives everything up at every
    rebalance, also the one after the older one left. (Kafka picks the
    protocol again at every rebalance, so there the group turns cooperative
    then; the embedded broker keeps the protocol a group formed with until
    the group is empty, so that step is not tested here.)"""
    group.start_producing()
    older = await group.join("m0", cooperative=False)  # offers only the eager protocol
    await group.until("m0 owning everything", lambda: older.owned() == set(range(PARTITIONS)))
    newer = await group.join("m1")
    await group.until("m1 getting its share", lambda: len(newer.owned()) == PARTITIONS // 2)
    assert newer.cooperation is not None and newer.cooperation.protocol == "faust"
    assert newer.cooperation.cooperative_rebalances == 0
    # m0 leaves: m1's next rebalance is still eager (it gives its share up first)
    shared = frozenset(newer.owned())
    await group.leave(older)
    await group.until("m1 owning everything", lambda: newer.owned() == set(range(PARTITIONS)))
    assert shared in newer.revoked(), group.describe()
    print(f"protocol after the older member left: {newer.cooperation.protocol}")
    await group.stop_producing()
    await group.until("every record consumed", group.drained)
    group.check_each_offset_read_once()


async def test_a_member_that_lost_its_membership_gives_everything_up(group: Group) -> None:
    group.start_producing()
    first = await group.join("m1")
    second = await group.join("m2")
    await group.until("a cooperative split", lambda: len(first.owned()) == len(second.owned()) == 3)
    await group.until(
        "a cooperative generation",
        lambda: first.cooperation is not None and first.cooperation.protocol == PROTOCOL,
    )
    # m1's heartbeats stall past the session: the group drops it (the embedded
    # broker notices when someone next asks; Kafka on its own timer) and m1
    # learns it when its heartbeat is answered
    owned = frozenset(first.owned())
    coordinator = first.consumer._coordinator
    send = coordinator._send_req
    stalled = asyncio.Event()

    async def stalling(request: Any) -> Any:
        if type(request).__name__.startswith("HeartbeatRequest") and not stalled.is_set():
            stalled.set()
            await asyncio.sleep(SESSION_MS / 1000 + 3)
        return await send(request)

    coordinator._send_req = stalling
    await group.until("m1 giving everything up", lambda: owned in first.revoked(), timeout=60)
    revoked = next(c for c in first.calls if c[0] == "revoked" and c[1] == owned)
    # given up as lost: with its generation reset, so its commit did not go
    # through (it failed, or there was no position left to commit: whether the
    # listener still reads one depends on timing)
    assert revoked[3] == -1, first.calls
    # and the member knew it had lost its membership while it gave them up
    assert any(r.partitions == owned and r.membership_lost for r in first.revoked_with), (
        first.revoked_with
    )
    after = first.calls[first.calls.index(revoked) + 1 :]
    assert not after or after[0][0] != "committed", first.calls
    await group.until("m1 back with a share", lambda: len(first.owned()) == 3, timeout=60)
    await group.until(
        "a cooperative generation again",
        lambda: (
            first.cooperation is not None
            and first.cooperation.protocol == PROTOCOL
            and not first.cooperation.membership_lost
        ),
    )
    await group.until(
        "every partition owned again",
        lambda: first.owned() | second.owned() == set(range(PARTITIONS)),
    )
    await group.stop_producing()
    await group.until("every record consumed", group.drained)


async def test_a_commit_the_rebalance_made_stale_does_not_lose_the_membership(
    group: Group,
) -> None:
    """A commit answered after the member's generation moved on is refused for
    its generation (illegal generation): it fails alone. aiokafka would
    reset the generation for it, and the member would give every partition
    up as lost (its kept partitions stopped, read again, the next rebalance
    eager): seen in the rebalance benchmark, where a kept task then stopped
    for 14.8 s."""
    from aiokafka.errors import CommitFailedError

    group.start_producing()
    first = await group.join("m1")
    await group.until("m1 owning everything", lambda: len(first.owned()) == PARTITIONS)
    second = await group.join("m2")
    await group.until("a cooperative split", lambda: len(first.owned()) == len(second.owned()) == 3)
    await group.until(
        "a cooperative generation",
        lambda: first.cooperation is not None and first.cooperation.protocol == PROTOCOL,
    )
    cooperation = first.cooperation
    assert cooperation is not None
    kept = frozenset(first.owned())
    calls_before = len(first.calls)
    coordinator = first.consumer._coordinator
    generation = coordinator.generation
    # m1 commits now; its OffsetCommit reaches the broker only once a rebalance
    # completed (as when it queues behind a held JoinGroup, or the network stalls)
    client = first.consumer._client
    send = client.send

    async def late(node_id: Any, request: Any, **kwargs: Any) -> Any:
        if type(request).__name__.startswith("OffsetCommitRequest"):
            await group.until(
                "m1's generation moving on",
                lambda: coordinator.generation != generation and not cooperation.kept,
                60,
            )
        return await send(node_id, request, **kwargs)

    client.send = late
    positions = {
        tp: OffsetAndMetadata(await first.consumer.position(tp), "")
        for tp in first.consumer.assignment()
    }
    commit = asyncio.create_task(first.consumer.commit(positions))
    await group.join("m3")  # m1 rejoins keeping its partitions
    with pytest.raises(CommitFailedError, match="already rebalanced"):
        await commit
    client.send = send
    # whatever the broker answered, m1 did not lose its membership: nothing it
    # kept was given up as lost (generation -1), and it went on cooperatively
    assert not cooperation.membership_lost, group.describe()
    for kind, parts, _, generation in first.calls[calls_before:]:
        assert not (kind == "revoked" and parts == kept), first.calls
        assert generation != -1, first.calls
    await group.until(
        "the group settled", lambda: sum(len(m.owned()) for m in group.members) == PARTITIONS
    )
    await group.stop_producing()
    await group.until("every record consumed", group.drained)
    group.check_each_offset_read_once()


async def test_a_member_killed_after_giving_up_its_share_loses_nothing(group: Group) -> None:
    """kill -9 of the member that was revoking, before the follow-up rebalance:
    what it gave up is committed and reaches the other member; what it kept
    goes there too once the group drops it (read again from its last commit,
    never skipped)."""
    group.start_producing()
    first = await group.join("m1")
    await group.until("m1 owning everything", lambda: first.owned() == set(range(PARTITIONS)))
    await group.until("m1 consuming", lambda: len(first.consumed) > 100)
    coordinator = first.consumer._coordinator
    send = coordinator._send_req
    dead, buried = asyncio.Event(), asyncio.Event()

    async def silent_once_dead(request: Any) -> Any:
        if dead.is_set():  # a dead process sends nothing more
            await buried.wait()
            raise KafkaConnectionError("the process is dead")
        return await send(request)

    coordinator._send_req = silent_once_dead
    revoke = first.on_partitions_revoked

    async def revoke_then_die(revoked: Any) -> None:
        await revoke(revoked)
        if revoked:
            dead.set()
            assert first.task is not None
            first.task.cancel()

    first.on_partitions_revoked = revoke_then_die  # type: ignore[method-assign]
    second = await group.join("m2")
    await group.until("m1 dying after its revoke", dead.is_set)
    given_up = first.revoked()[0]
    await group.until(
        "m2 owning everything", lambda: second.owned() == set(range(PARTITIONS)), timeout=90
    )
    await group.stop_producing()
    await group.until("every record consumed", group.drained)
    for p, offsets in sorted(group.offsets_read().items()):
        assert set(offsets) == set(range(group.produced[p])), f"partition {p}: a hole"
        if p in given_up:  # committed when given up: not one record read twice
            assert len(offsets) == len(set(offsets)), f"partition {p} given up: read twice"
    buried.set()  # (so that closing the dead consumer does not hang)


async def test_a_partition_being_given_up_hands_out_no_record_while_its_owner_commits(
    group: Group,
) -> None:
    """A member gives a partition up in its listener (it reads its positions and
    commits them, here slowly, as a worker flushing state would) while its
    consumer keeps running for the partitions it keeps. The partition given up
    hands out no record after its positions were read: a record handed out
    then would be past the commit, and read again by the new owner (9 records
    were, in a CI run, behind a commit's round trip)."""
    group.start_producing()
    first = await group.join("m1")
    await group.until("m1 owning everything", lambda: first.owned() == set(range(PARTITIONS)))
    await group.until("m1 consuming", lambda: len(first.consumed) > 100)
    read_at: list[float] = []

    async def slow_revoke(revoked: Any) -> None:
        first.calls.append(("revoked", frozenset(tp.partition for tp in revoked),
                            time.monotonic(), first.consumer._coordinator.generation))  # fmt: skip
        if not revoked:
            return
        positions = {tp: OffsetAndMetadata(await first.consumer.position(tp), "") for tp in revoked}
        read_at.append(time.monotonic())
        await asyncio.sleep(1.0)  # the producer writes on meanwhile
        await first.consumer.commit(positions)

    first.on_partitions_revoked = slow_revoke  # type: ignore[method-assign]
    second = await group.join("m2")
    await group.until("m2 getting its share", lambda: len(second.owned()) == PARTITIONS // 2)
    await asyncio.sleep(1.0)
    await group.stop_producing()
    await group.until("every record consumed", group.drained)
    given_up = second.owned()
    late = sorted(
        (p, offset) for p, offset, t in first.consumed if p in given_up and t > read_at[0]
    )
    assert not late, f"handed out after the positions were read: {late[:10]} ({len(late)})"
    group.check_each_offset_read_once()


def _all_revoked(member: Member) -> frozenset[int]:
    out: frozenset[int] = frozenset()
    for parts in member.revoked():
        out |= parts
    return out
