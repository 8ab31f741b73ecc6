"""``streamjoin:PartitionAssignor``: the assignment core inside faust workers.

A drop-in replacement for faust-streaming's assignor: any faust app adopts it
with the setting ``PartitionAssignor="streamjoin:PartitionAssignor"``
(:class:`streamjoin.App` sets it by default). Every placement decision is the
pure core's (:func:`streamjoin.assignment.assign`); this module only
translates between Kafka's group protocol, faust's router and the core.

Per-worker settings (:class:`~streamjoin.membership.settings.MemberSettings`:
instance id, host label, rack, capacity, recovery lag) come from the app's
configuration, ``app.conf.streamjoin_member``, which ``streamjoin worker``
sets from its flags. When it is not set (a plain ``faust worker``), they are
read once from the ``STREAMJOIN_*`` variables
(:meth:`~streamjoin.membership.settings.MemberSettings.from_env`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from faust.types.assignor import HostToPartitionMap, PartitionAssignorT
from faust.types.tuples import TP
from yarl import URL

from streamjoin._histogram import SECOND_BOUNDS, Buckets
from streamjoin.faust.assignment.hooks import observed_assignment
from streamjoin.faust.assignment.leader import lead
from streamjoin.faust.assignment.member_file import MemberFile
from streamjoin.faust.kafka.consumer import mend_fetcher_close
from streamjoin.faust.kafka.session import app_aiokafka_consumer
from streamjoin.membership.settings import MemberSettings
from streamjoin.membership.userdata import (
    AssignmentInfo,
    MemberInfo,
    decode_assignment,
    encode_member,
)

if TYPE_CHECKING:
    from faust.types import AppT

    from streamjoin.assignment.model import LastAssignment

__all__ = ["REBALANCES_KEPT", "PartitionAssignor"]

#: how a rebalance reached this worker: its partitions kept running (cooperative),
#: given up first (eager), or given up because its membership was lost
REBALANCE_KINDS = ("cooperative", "eager", "lost")
#: rebalances of this member its assignment page lists (the most recent)
REBALANCES_KEPT = 32

logger = logging.getLogger(__name__)

STATE_FILE = "streamjoin-member.json"


class PartitionAssignor(AbstractPartitionAssignor, PartitionAssignorT):  # type: ignore[misc]
    """faust ``PartitionAssignorT`` + aiokafka assignor backed by streamjoin's core."""

    #: version of the Kafka protocol metadata (the userdata has its own)
    protocol_version = 1

    def __init__(self, app: AppT, replicas: int = 0) -> None:
        AbstractPartitionAssignor.__init__(self)
        self.app = app
        self.replicas = replicas
        self._file: MemberFile | None = None
        self._actives: dict[str, list[int]] = {}
        self._standbys: dict[str, list[int]] = {}
        self._warmups: dict[str, list[int]] = {}
        self._warmup_tps: frozenset[TP] = frozenset()
        self._active_tps: frozenset[TP] = frozenset()
        self._standby_tps: frozenset[TP] = frozenset()
        self._topic_groups: dict[str, int] = {}
        self._changelog_distribution: HostToPartitionMap = {}
        self._external_distribution: HostToPartitionMap = {}
        self._tps_url: dict[TP, str] = {}
        self._external_tps_url: dict[TP, str] = {}
        # JSON-ready stats (served on the web port): values of any JSON type
        self.last_rebalance: dict[str, Any] = {}
        #: stats of the last assignment this member made as the leader
        self.last_assignment: dict[str, Any] = {}
        #: what that assignment gave each member (see streamjoin.faust.assignment.leader)
        self.last_actives: LastAssignment | None = None
        self.settings = member_settings(app)
        #: the rebalance under way keeps this member's actives running (see
        #: streamjoin.faust.kafka.cooperative): its metadata says so
        self._kept = False
        #: this member's latest rebalances, ``[began, ended]`` wall-clock
        #: seconds: from its first JoinGroup to the assignment it got
        self.rebalances: deque[tuple[float, float]] = deque(maxlen=REBALANCES_KEPT)
        self._joining_since: float | None = None
        # for /metrics (streamjoin.faust.metrics): counted once per rebalance
        #: rebalances this worker completed, by kind (see on_rebalance_prepare)
        self.rebalance_kinds: dict[str, int] = dict.fromkeys(REBALANCE_KINDS, 0)
        self._kind = "eager"
        #: seconds from its first JoinGroup to the assignment, per rebalance
        self.rebalance_seconds = Buckets(SECOND_BOUNDS)
        #: active topic-partitions this worker kept, gained and lost, summed over rebalances
        self.partition_outcomes: dict[str, int] = {"gained": 0, "kept": 0, "lost": 0}
        #: seconds each assignment it computed as the leader took
        self.assignment_seconds = Buckets(SECOND_BOUNDS)

    def on_rebalance_prepare(self, kept: bool, lost: bool = False) -> None:
        """The consumer starts a rebalance; *kept*: it keeps its partitions
        running through it (cooperative), so its actives are what it owns now;
        *lost*: it rejoins after it lost its membership (session expired, fenced)."""
        self._kept = kept
        self._kind = "cooperative" if kept else "lost" if lost else "eager"

    # -- aiokafka's AbstractPartitionAssignor --------------------------------
    @property
    def name(self) -> str:
        return "streamjoin"

    @property
    def version(self) -> int:
        return self.protocol_version

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        """What this worker tells the leader: identity, claims and offsets.

        Called on the consumer's thread just before it sends JoinGroup: the
        worker's session lease starts following the coordinator's answers here
        (see :mod:`streamjoin.faust.restore.owner_tokens`), and the consumer's
        fetcher is mended to close cleanly
        (:func:`~streamjoin.faust.kafka.consumer.mend_fetcher_close`). The
        first call since the last assignment starts the rebalance's entry in
        :attr:`rebalances`.
        """
        if self._joining_since is None:
            self._joining_since = time.time()
        ownership = getattr(self.app.tables, "ownership", None)
        if ownership is not None:
            ownership.install()
        mend_fetcher_close(app_aiokafka_consumer(self.app))
        member = self._load_member()
        info = MemberInfo(
            id=member["id"],
            url=str(self.app.conf.canonical_url),
            host=self.settings.host_label or member["id"],
            rack=self.settings.rack,
            capacity=self.settings.capacity,
            generation=member.get("generation"),
            actives=member.get("actives", {}),
            standbys=member.get("standbys", {}),
            offsets=self._persisted_offsets(),
            warmups=member.get("warmups", {}),
            cooperative=self._kept,
        )
        return ConsumerProtocolMemberMetadata(
            self.protocol_version, sorted(topics), encode_member(info)
        )

    def assign(
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        """Leader: decode every member, run the core, encode each share.

        As faust's assignor: inside a tracing span when the app has a tracer,
        between ``app.sensors.on_assignment_start`` and
        ``on_assignment_completed`` (whose per-sensor state also gets the
        assignment's stats under ``"streamjoin"``) or ``on_assignment_error``.
        """
        return observed_assignment(
            self.app, self, lambda: self._assign(cluster, members), lambda: self.last_assignment
        )

    def _assign(
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        return lead(self, cluster, members)

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        """Member: adopt the leader's decision and remember it for the next rebalance."""
        began, self._joining_since = self._joining_since, None
        if began is not None:
            ended = time.time()
            self.rebalances.append((began, ended))
            self.rebalance_seconds.observe(max(0.0, ended - began))
        self.rebalance_kinds[self._kind] += 1
        self._kind = "eager"  # (eager apps are never told otherwise)
        info = _readable(assignment)
        before_a, before_s = self._held_before()
        self._actives = {t: list(p) for t, p in info.actives.items()}
        self._standbys = {t: list(p) for t, p in info.standbys.items()}
        self._warmups = {t: list(p) for t, p in info.warmups.items()}
        self._active_tps = _tps(self._actives)
        self._warmup_tps = _tps(self._warmups)
        # warm-ups are restored like standbys (faust's TableManager and ours)
        self._standby_tps = _tps(self._standbys) | self._warmup_tps
        self._topic_groups = dict(info.groups)
        self._set_distribution(info)
        self._remember(info)
        self._report_rebalance(info, before_a, before_s)

    def _held_before(self) -> tuple[frozenset[TP], frozenset[TP]]:
        """The actives and standbys this member held before this assignment."""
        before_a, before_s = self._active_tps, self._standby_tps
        if not before_a and not before_s:
            # first assignment of this process: what the data directory says
            # it ran before the restart is what counts as kept or warm
            member = self._load_member()
            before_a = _tps(member.get("actives", {}))
            before_s = _tps(member.get("standbys", {}))
        return before_a, before_s

    def _report_rebalance(
        self, info: AssignmentInfo, before_a: frozenset[TP], before_s: frozenset[TP]
    ) -> None:
        """What it gained, lost and kept: ``last_rebalance``, the outcome counters, a log line."""
        changelogs = set(getattr(self.app.tables, "changelog_topics", set()))
        gained = self._active_tps - before_a
        stateful = {tp for tp in gained if tp.topic in changelogs}
        warm = sum(1 for tp in stateful if tp in before_s)
        self.last_rebalance = {
            "generation": info.generation,
            "actives": _delta(before_a, self._active_tps),
            "standbys": _delta(before_s, self._standby_tps),
            "warm": warm,
            "cold": len(stateful) - warm,
            "warmups": len(self._warmup_tps),
        }
        a, s = self.last_rebalance["actives"], self.last_rebalance["standbys"]
        for outcome in self.partition_outcomes:
            self.partition_outcomes[outcome] += a[outcome]
        logger.info(
            "streamjoin: rebalance generation %d: actives +%d -%d =%d "
            "(changelog partitions: %d warm, %d cold); standbys +%d -%d =%d; "
            "warm-ups %d changelog partition(s)",
            info.generation,
            a["gained"],
            a["lost"],
            a["kept"],
            warm,
            len(stateful) - warm,
            s["gained"],
            s["lost"],
            s["kept"],
            len(self._warmup_tps),
        )

    # -- faust's PartitionAssignorT and router ----------------------------
    def group_for_topic(self, topic: str) -> int:
        """The task group of *topic* (``KeyError`` for a topic not assigned, as faust's)."""
        return self._topic_groups[topic]

    def assigned_actives(self) -> set[TP]:
        return set(self._active_tps)

    def assigned_standbys(self) -> set[TP]:
        return set(self._standby_tps)

    def is_active(self, tp: TP) -> bool:
        return tp in self._active_tps

    def is_standby(self, tp: TP) -> bool:
        return tp in self._standby_tps

    def assigned_warmups(self) -> set[TP]:
        """Changelog partitions restored here as warm-ups (also in ``assigned_standbys``)."""
        return set(self._warmup_tps)

    @property
    def changelog_distribution(self) -> HostToPartitionMap:
        return self._changelog_distribution

    def key_store(self, topic: str, key: bytes) -> URL:
        return URL(self._tps_url[self.app.producer.key_partition(topic, key)])

    def external_key_store(self, topic: str, key: bytes) -> URL:
        return URL(self._external_tps_url[self.app.producer.key_partition(topic, key)])

    def table_metadata(self, topic: str) -> HostToPartitionMap:
        return {
            host: {t: p for t, p in by_topic.items() if t == topic}
            for host, by_topic in self._changelog_distribution.items()
        }

    def tables_metadata(self) -> HostToPartitionMap:
        return self._changelog_distribution

    def external_topics_metadata(self) -> HostToPartitionMap:
        return self._external_distribution

    def describe(self) -> dict[str, Any]:
        """The current assignment as JSON-ready data (served on the web port);
        ``rebalances``: :attr:`rebalances` to the millisecond; ``led``: the stats
        of the last assignment this worker made as the leader (empty if none)."""
        member = (self._file.member if self._file is not None else None) or {}
        return {
            "member": member.get("id"),
            "generation": member.get("generation"),
            "actives": {t: sorted(p) for t, p in sorted(self._actives.items())},
            "standbys": {t: sorted(p) for t, p in sorted(self._standbys.items())},
            "warmups": {t: sorted(p) for t, p in sorted(self._warmups.items())},
            "last_rebalance": self.last_rebalance,
            # list(): one copy while the consumer's thread may append
            "rebalances": [[round(a, 3), round(b, 3)] for a, b in list(self.rebalances)],
            "rack": self.settings.rack,
            # the stats of the last assignment this worker made as the group's leader
            # (its generation says whether it is the current one), e.g. cross-rack tasks
            "led": dict(self.last_assignment),
        }

    def stop_worker(self, exc: Exception) -> None:
        """Crash the app (its worker exits non-zero) from the consumer's thread.

        An assignment that cannot be made (e.g. co-partitioned topics whose
        counts changed on the broker) would otherwise be retried forever.
        """
        app = self.app
        loop = getattr(app, "loop", None)
        crash = getattr(app, "crash", None)
        if loop is None or crash is None:
            return

        def schedule() -> None:
            self._crashing = asyncio.ensure_future(crash(exc))

        try:
            loop.call_soon_threadsafe(schedule)
        except RuntimeError:  # loop closed: the worker is stopping anyway
            logger.debug("streamjoin: event loop closed; not crashing the app")

    # -- internals -----------------------------------------------------------
    def _set_distribution(self, info: AssignmentInfo) -> None:
        changelogs = set(getattr(self.app.tables, "changelog_topics", set()))
        routes = info.route_map()
        self._changelog_distribution = {
            url: {t: p for t, p in by_topic.items() if t in changelogs}
            for url, by_topic in routes.items()
        }
        self._external_distribution = {
            url: {t: p for t, p in by_topic.items() if t not in changelogs}
            for url, by_topic in routes.items()
        }
        self._tps_url = {
            TP(t, p): url
            for url, by_topic in self._changelog_distribution.items()
            for t, ps in by_topic.items()
            for p in ps
        }
        self._external_tps_url = {
            TP(t, p): url
            for url, by_topic in self._external_distribution.items()
            for t, ps in by_topic.items()
            for p in ps
        }

    def _member_file(self) -> MemberFile:
        if self._file is None:
            self._file = MemberFile(Path(self.app.conf.datadir) / STATE_FILE)
        return self._file

    def _load_member(self) -> dict[str, Any]:
        static = self.settings.instance_id or self.app.conf.consumer_group_instance_id
        return self._member_file().load(static, self.app.conf.id)

    def _remember(self, info: AssignmentInfo) -> None:
        self._member_file().remember(info, self._load_member())

    def _persisted_offsets(self) -> dict[str, dict[int, int]]:
        tables = self.app.tables
        reader = getattr(tables, "persisted_offsets", None)
        if reader is None:
            return {}
        try:
            raw: Mapping[tuple[str, int], int] = reader()
        except Exception as exc:  # never let a store problem break a rebalance
            logger.warning("streamjoin: cannot read persisted changelog offsets: %s", exc)
            return {}
        out: MutableMapping[str, dict[int, int]] = {}
        for (topic, partition), offset in sorted(raw.items()):
            out.setdefault(topic, {})[partition] = offset
        return dict(out)


def _readable(assignment: ConsumerProtocolMemberAssignment) -> AssignmentInfo:
    """The leader's decision, or what Kafka assigned as actives if it is unreadable."""
    info = decode_assignment(assignment.user_data)
    if info is None:
        logger.error(
            "streamjoin: the group leader sent an assignment this version cannot read "
            "(a worker running another assignor?); running what Kafka assigned as actives"
        )
        actives = {topic: sorted(parts) for topic, parts in assignment.assignment}
        info = AssignmentInfo(0, actives, {}, (), {}, {})
    return info


def _tps(parts: Mapping[str, Iterable[int]]) -> frozenset[TP]:
    return frozenset(TP(t, p) for t, ps in parts.items() for p in ps)


def _delta(before: frozenset[TP], after: frozenset[TP]) -> dict[str, int]:
    return {"gained": len(after - before), "lost": len(before - after), "kept": len(after & before)}


def member_settings(app: AppT) -> MemberSettings:
    """The member settings of *app*: ``app.conf.streamjoin_member``, else the environment."""
    configured = getattr(app.conf, "streamjoin_member", None)
    if isinstance(configured, MemberSettings):
        return configured
    return MemberSettings.from_env(os.environ)
