"""``streamjoin.App``: a :class:`faust.App` with streamjoin's defaults.

Compared with a plain ``faust.App`` it changes only defaults; every one of
them can still be overridden by passing the faust setting explicitly:

* ``store="rocksdb://"``: table state in RocksDB through rocksdict, one
  database per table partition under the worker's data directory.
* ``TableManager="streamjoin:TableManager"``: streamjoin's table restoration
  (see :mod:`streamjoin.faust.restore.tables`) instead of faust's recovery.
* ``PartitionAssignor="streamjoin:PartitionAssignor"`` (:data:`ASSIGNOR`):
  streamjoin's sticky, balanced, rack-aware, warm-first assignor.
* Group timeouts short enough for a group of workers to settle within
  seconds (:data:`GROUP_TIMEOUTS`): a killed worker is noticed after
  ``broker_session_timeout`` seconds, live members heartbeat every
  ``broker_heartbeat_interval`` seconds, and the coordinator waits at most
  ``broker_rebalance_timeout`` seconds for members to rejoin. The embedded
  broker also holds every JoinGroup for half the session timeout, rounded up
  to whole seconds (3 s here, 30 s with faust's defaults), so on it every
  rebalance pauses at least that long. On a large production cluster raise
  them (faust's own defaults are 60/3/60 s).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import faust

from streamjoin.errors import ConfigurationError

if TYPE_CHECKING:
    from faust.types import TransportT

    from streamjoin.faust.join.operator import Join
    from streamjoin.faust.join.types import TopicArg
    from streamjoin.join.policy import JoinPolicy

__all__ = [
    "ASSIGNOR",
    "COOPERATIVE_ENV",
    "DEFAULTS",
    "GROUP_TIMEOUTS",
    "App",
    "cooperative_from_env",
]

#: The environment variable: ``0``, ``false``, ``no`` or ``off`` rebalances eagerly
#: (unset: cooperatively; see :func:`cooperative_from_env`)
COOPERATIVE_ENV = "STREAMJOIN_COOPERATIVE"

#: The partition assignor every streamjoin.App uses unless told otherwise.
ASSIGNOR = "streamjoin:PartitionAssignor"

#: Consumer-group timeouts (seconds): a group settles in a few seconds.
GROUP_TIMEOUTS: Mapping[str, float] = {
    "broker_session_timeout": 6.0,
    "broker_heartbeat_interval": 1.0,
    "broker_rebalance_timeout": 20.0,
}

#: Settings an App gets when the caller does not pass them.
DEFAULTS: Mapping[str, Any] = {  # Any: faust settings' values, of many types
    "store": "rocksdb://",
    "TableManager": "streamjoin:TableManager",
    "PartitionAssignor": ASSIGNOR,
    **GROUP_TIMEOUTS,
}


def cooperative_from_env() -> bool:
    """Whether an App rebalances cooperatively when not told: yes unless
    ``STREAMJOIN_COOPERATIVE`` is ``0``, ``false``, ``no`` or ``off`` (``1``,
    ``true``, ``yes``, ``on``, empty or unset: cooperative).

    Raises :class:`~streamjoin.errors.ConfigurationError` for any other value.
    """
    value = os.environ.get(COOPERATIVE_ENV, "").strip().lower()
    if value in ("", "1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(
        f"{COOPERATIVE_ENV}={value!r}: use 1/true/yes/on (cooperative rebalancing, "
        "the default) or 0/false/no/off (eager, as faust rebalances)"
    )


class App(faust.App):
    """A faust application with streamjoin's assignor, table restoration and RocksDB state.

    Arguments are those of :class:`faust.App`; settings missing from
    ``options`` take the values in :data:`DEFAULTS`. With the web server on,
    ``GET /streamjoin/assignment/`` returns the worker's current assignment.

    ``cooperative``: ``True`` makes the worker's consumer rebalance
    cooperatively (docs/assignment.rst, "Cooperative rebalancing") when its
    broker URL is a ``kafka://`` one: the tasks that stay on a worker keep
    running through a rebalance; ``False`` rebalances eagerly, as faust does.
    ``None`` (the default) reads ``STREAMJOIN_COOPERATIVE``: cooperative unless
    it is ``0``, ``false``, ``no`` or ``off``. Either way, on a ``kafka://``
    URL the worker's consumer fetches as the member's rack (``--rack``,
    ``STREAMJOIN_RACK``: its ``client_rack``, see
    :mod:`streamjoin.faust.kafka.transport`).
    """

    def __init__(
        self, id: str, *, cooperative: bool | None = None, **options: Any
    ) -> None:  # Any: faust.App's options
        for name, value in DEFAULTS.items():
            options.setdefault(name, value)
        #: whether the worker's consumer rebalances cooperatively
        self.cooperative = cooperative_from_env() if cooperative is None else cooperative
        super().__init__(id, **options)
        from streamjoin.faust.web import add_assignment_page, add_joins_page

        #: joins declared with :meth:`join`, by name
        self.joins: dict[str, Join] = {}
        add_assignment_page(self)
        add_joins_page(self)
        from streamjoin.faust.metrics.endpoint import add_metrics_page

        #: streamjoin's metrics (``GET /metrics``): the registry of this app's collector
        self.metrics = add_metrics_page(self)

    def _new_transport(self) -> TransportT:
        url = self.conf.broker_consumer[0]
        if url.scheme in ("kafka", "aiokafka"):
            from streamjoin.faust.kafka.transport import CooperativeTransport, RackAwareTransport

            kind = CooperativeTransport if self.cooperative else RackAwareTransport
            return kind(self.conf.broker_consumer, self)
        return super()._new_transport()

    def join(
        self,
        left: TopicArg,
        right: TopicArg,
        *,
        policy: JoinPolicy,
        name: str = "join",
        outputs: Mapping[str, TopicArg] | None = None,
        dead_letters: TopicArg | None = None,
        max_idle_ms: int = 2000,
        batch_max: int = 2000,
        batch_interval: float = 0.05,
        max_record_bytes: int = 512 * 1024,
    ) -> Join:
        """Join topics *left* and *right* (same partition count, same key) with *policy*.

        Arguments:
            left, right: faust topics (or topic names) keyed by the join key.
            policy: a :class:`streamjoin.join.policy.JoinPolicy`, e.g.
                :class:`streamjoin.ads.policy.AdAttribution`; it holds the
                :class:`~streamjoin.join.window.JoinWindow`.
            name: names the state table (``<name>-state``, changelogged) and the
                default topics ``<name>-<output>`` and ``<name>-dead-letters``.
            outputs: output name -> topic (or topic name) to override the defaults.
            dead_letters: topic (or name) of undecodable and late records.
            max_idle_ms: how long no record may reach the join while a task
                waits for a side that still has unread data, before the other
                side's records go ahead (like Kafka Streams' ``max.task.idle.ms``).
            batch_max, batch_interval: a batch starts as soon as records wait
                and the previous one is durable, with at most *batch_max*
                records per task, and every *batch_interval* seconds when none
                arrive (idle inputs).
            max_record_bytes: an input record whose key and value together are
                larger is dead-lettered (reason ``record of N bytes is over the
                join's limit``), its dead letter holding the key, the first KiB
                of the value and the original size in ``streamjoin-size``.

        Returns:
            the :class:`streamjoin.faust.join.operator.Join`; its ``outputs``
            are faust topics that ``@app.agent`` functions can consume.
        """
        from streamjoin.faust.join.operator import Join
        from streamjoin.join.errors import JoinConfigError

        if name in self.joins:
            raise JoinConfigError(f"a join named {name!r} already exists in app {self.conf.id!r}")
        join = Join(
            self,
            left,
            right,
            policy=policy,
            name=name,
            outputs=outputs,
            dead_letters=dead_letters,
            max_idle_ms=max_idle_ms,
            batch_max=batch_max,
            batch_interval=batch_interval,
            max_record_bytes=max_record_bytes,
        )
        self.joins[name] = join
        # A join holds records back (event-time order) and acks them only once
        # applied; on a rebalance it drops them unacked instead of waiting.
        self.conf.stream_wait_empty = False
        return join
