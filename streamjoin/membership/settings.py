"""A member's own assignment settings: identity, host label, rack, capacity, recovery lag,
and (when it leads) the warm-up cap and the costs rack-aware active placement trades.

They travel through the app's configuration (``app.conf.streamjoin_member``,
set by ``streamjoin worker`` from its flags or by :class:`streamjoin.App`).
A plain ``faust -A app worker`` sets them with ``STREAMJOIN_*`` variables,
which :meth:`MemberSettings.from_env` reads: the one place that reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from streamjoin.assignment.model import GroupState
from streamjoin.errors import ConfigurationError

__all__ = [
    "DEFAULT_RACK_MOVE_COST",
    "DEFAULT_RACK_TRAFFIC_COST",
    "DEFAULT_RECOVERY_LAG",
    "ENV_NAMES",
    "MemberSettings",
    "MemberSettingsError",
]

#: records of changelog lag at which a member still counts as caught up
DEFAULT_RECOVERY_LAG = 10_000
#: the assignment core's own defaults (:class:`~streamjoin.assignment.model.GroupState`)
DEFAULT_RACK_TRAFFIC_COST: int = GroupState.rack_traffic_cost
DEFAULT_RACK_MOVE_COST: int = GroupState.rack_move_cost

#: field -> environment variable
ENV_NAMES: dict[str, str] = {
    "instance_id": "STREAMJOIN_INSTANCE_ID",
    "host_label": "STREAMJOIN_HOST_LABEL",
    "rack": "STREAMJOIN_RACK",
    "capacity": "STREAMJOIN_CAPACITY",
    "recovery_lag": "STREAMJOIN_RECOVERY_LAG",
    "max_warmup_replicas": "STREAMJOIN_MAX_WARMUP_REPLICAS",
    "rack_traffic_cost": "STREAMJOIN_RACK_TRAFFIC_COST",
    "rack_move_cost": "STREAMJOIN_RACK_MOVE_COST",
    "rejoin_pace_ms": "STREAMJOIN_REJOIN_PACE_MS",
}


class MemberSettingsError(ConfigurationError):
    """A member setting is malformed (a capacity that is not a positive integer, ...)."""


@dataclass(frozen=True)
class MemberSettings:
    """What this worker tells the group leader about itself.

    Attributes:
        instance_id: stable identity (default: faust's
            ``consumer_group_instance_id``, else an id kept in the data directory).
        host_label: no standby goes on a member with the same label as the
            task's active (default: the member id; set it to the machine's name).
        rack: rack or zone; a task's copies spread over racks, its active goes
            where its partitions have replicas, and the worker's consumer
            fetches as this rack (``client_rack``).
        capacity: integer weight of this member's share of tasks (>= 1).
        recovery_lag: ``acceptable_recovery_lag`` when this member leads (>= 0);
            also when this member's warm-ups count as caught up.
        max_warmup_replicas: ``max_warmup_replicas`` when this member leads:
            warm-ups the whole group may hold at once (``None``: no cap; 0:
            no warm-ups, tasks move at once, cold if need be).
        rack_traffic_cost: ``rack_traffic_cost`` when this member leads: what
            one partition read across racks costs (>= 0; 0: actives ignore
            replica racks).
        rack_move_cost: ``rack_move_cost`` when this member leads: what moving
            a task beyond what balance needs costs, against that traffic (>= 0).
        rejoin_pace_ms: every rejoin this member asks for itself waits until this
            many milliseconds after it got its assignment (``None``: only after
            a generation completed without it; see
            :mod:`streamjoin.faust.kafka.cooperative`). For brokers that answer
            followers' SyncGroups late, like the embedded one.
    """

    instance_id: str | None = None
    host_label: str | None = None
    rack: str | None = None
    capacity: int = 1
    recovery_lag: int = DEFAULT_RECOVERY_LAG
    max_warmup_replicas: int | None = None
    rack_traffic_cost: int = DEFAULT_RACK_TRAFFIC_COST
    rack_move_cost: int = DEFAULT_RACK_MOVE_COST
    rejoin_pace_ms: int | None = None

    def __post_init__(self) -> None:
        cap = self.max_warmup_replicas
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
            raise MemberSettingsError(
                f"max warm-up replicas must be an integer >= 0 (or unset), got {cap!r}"
            )
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, int):
            raise MemberSettingsError(f"capacity must be an integer >= 1, got {self.capacity!r}")
        if self.capacity < 1:
            raise MemberSettingsError(f"capacity must be >= 1, got {self.capacity}")
        if isinstance(self.recovery_lag, bool) or not isinstance(self.recovery_lag, int):
            raise MemberSettingsError(
                f"recovery lag must be an integer >= 0, got {self.recovery_lag!r}"
            )
        if self.recovery_lag < 0:
            raise MemberSettingsError(f"recovery lag must be >= 0, got {self.recovery_lag}")
        for name, cost in (
            ("rack traffic cost", self.rack_traffic_cost),
            ("rack move cost", self.rack_move_cost),
        ):
            if isinstance(cost, bool) or not isinstance(cost, int) or cost < 0:
                raise MemberSettingsError(f"{name} must be an integer >= 0, got {cost!r}")
        pace = self.rejoin_pace_ms
        if pace is not None and (isinstance(pace, bool) or not isinstance(pace, int) or pace < 0):
            raise MemberSettingsError(
                f"rejoin pace must be a whole number of milliseconds >= 0 (or unset), got {pace!r}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> MemberSettings:
        """Settings from the ``STREAMJOIN_*`` variables of *environ* (unset: defaults).

        Raises:
            MemberSettingsError: a number is malformed.
        """

        def text(field: str) -> str | None:
            return environ.get(ENV_NAMES[field]) or None

        def number(field: str, default: int) -> int:
            raw = text(field)
            if raw is None:
                return default
            try:
                return int(raw)
            except ValueError:
                raise MemberSettingsError(
                    f"{ENV_NAMES[field]}={raw!r}: give a whole number"
                ) from None

        return cls(
            instance_id=text("instance_id"),
            host_label=text("host_label"),
            rack=text("rack"),
            capacity=number("capacity", 1),
            recovery_lag=number("recovery_lag", DEFAULT_RECOVERY_LAG),
            max_warmup_replicas=(
                None if text("max_warmup_replicas") is None else number("max_warmup_replicas", 0)
            ),
            rack_traffic_cost=number("rack_traffic_cost", DEFAULT_RACK_TRAFFIC_COST),
            rack_move_cost=number("rack_move_cost", DEFAULT_RACK_MOVE_COST),
            rejoin_pace_ms=(
                None if text("rejoin_pace_ms") is None else number("rejoin_pace_ms", 0)
            ),
        )

    def overridden(
        self,
        *,
        instance_id: str | None = None,
        host_label: str | None = None,
        rack: str | None = None,
        capacity: int | None = None,
        recovery_lag: int | None = None,
        max_warmup_replicas: int | None = None,
        rack_traffic_cost: int | None = None,
        rack_move_cost: int | None = None,
    ) -> MemberSettings:
        """These settings with every given (not ``None``) value replaced."""
        return replace(
            self,
            instance_id=self.instance_id if instance_id is None else instance_id,
            host_label=self.host_label if host_label is None else host_label,
            rack=self.rack if rack is None else rack,
            capacity=self.capacity if capacity is None else capacity,
            recovery_lag=self.recovery_lag if recovery_lag is None else recovery_lag,
            max_warmup_replicas=(
                self.max_warmup_replicas if max_warmup_replicas is None else max_warmup_replicas
            ),
            rack_traffic_cost=(
                self.rack_traffic_cost if rack_traffic_cost is None else rack_traffic_cost
            ),
            rack_move_cost=self.rack_move_cost if rack_move_cost is None else rack_move_cost,
        )
