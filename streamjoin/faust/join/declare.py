"""Declaring a join in a faust app: what is checked, and what is created.

The checks run before anything is declared, so a join that is refused leaves
the app untouched: the two sides are single, distinct, co-partitioned topics;
the batching knobs are in range; the app restores tables with streamjoin's
:class:`~streamjoin.faust.restore.tables.TableManager`; every output override names an
output the policy emits. Then the join's topics (outputs, dead letters, the
source both sides are read from, all raw bytes), its changelogged state table
and its co-partition group are declared on the app.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from streamjoin.assignment.grouping import copartition_problems
from streamjoin.faust.join.types import JoinConfig, TopicArg
from streamjoin.join.errors import JoinConfigError
from streamjoin.join.policy import JoinPolicy

if TYPE_CHECKING:
    from faust.types import AppT, TableT, TopicT

__all__ = [
    "RAW",
    "STATE_WRITE_BUFFER_BYTES",
    "Declared",
    "check_batching",
    "check_outputs",
    "check_record_limit",
    "check_sides",
    "check_table_manager",
    "declare_copartitioned",
    "declare_dead_letters",
    "declare_join",
    "declare_outputs",
    "declare_source",
    "declare_state_table",
    "join_partitions",
]


#: the size of a memtable of the join's state, per task (RocksDB's write buffer;
#: faust's default, 64 MiB, up to three per task): a worker's memory grew by
#: 4 x 64 MiB over a 4.9M-record backlog before the first flush, where 16 MiB
#: filled in the first fifth and read as fast (docs/benchmarks.rst, "A memtable
#: of 16 MiB")
STATE_WRITE_BUFFER_BYTES = 16 * 1024**2


#: serializers of every topic a join reads or writes: the policy does the decoding
class _Codecs(TypedDict):
    key_serializer: str
    value_serializer: str


RAW: _Codecs = {"key_serializer": "raw", "value_serializer": "raw"}


@dataclass(frozen=True)
class Declared:
    """A join as declared on the app: its configuration and the faust objects behind it.

    Attributes:
        config: the checked configuration (topic names).
        outputs: output name -> faust topic (raw bytes).
        dead_letters: the dead-letter faust topic.
        source: the one faust topic both sides are read from.
        table: the changelogged state table ``<name>-state``.
    """

    config: JoinConfig
    outputs: dict[str, TopicT]
    dead_letters: TopicT
    source: TopicT
    table: TableT[bytes, bytes]


def declare_join(
    app: AppT,
    left: TopicArg,
    right: TopicArg,
    *,
    policy: JoinPolicy,
    name: str,
    outputs: Mapping[str, TopicArg] | None,
    dead_letters: TopicArg | None,
    partitions: int | None,
    max_idle_ms: int,
    batch_max: int,
    batch_interval: float,
    max_record_bytes: int,
) -> Declared:
    """Check a join's declaration, then declare its topics, state table and
    co-partition group on *app* (nothing is declared unless every check passed).

    Raises:
        JoinConfigError: the declaration is refused (the message says why).
    """
    max_record_bytes = check_record_limit(name, max_record_bytes)
    left_topic, right_topic, counts = check_sides(name, left, right)
    count = join_partitions(app, partitions, counts)
    check_batching(name, max_idle_ms, batch_max, batch_interval)
    check_table_manager(app, name)
    wanted = check_outputs(name, policy, outputs)
    topics = declare_outputs(app, name, policy, wanted)
    dlq = declare_dead_letters(app, name, dead_letters)
    source = declare_source(app, left_topic, right_topic, count)
    table = declare_state_table(app, name, count)
    changelog = table.changelog_topic.get_topic_name()
    declare_copartitioned(app, (left_topic, right_topic, changelog))
    config = JoinConfig(
        name=name,
        left_topic=left_topic,
        right_topic=right_topic,
        partitions=count,
        window=policy.window,
        changelog_topic=changelog,
        outputs={out: topic.get_topic_name() for out, topic in sorted(topics.items())},
        dead_letters=dlq.get_topic_name(),
        max_idle_ms=max_idle_ms,
        batch_max=batch_max,
        batch_interval=batch_interval,
        max_record_bytes=max_record_bytes,
    )
    return Declared(config, topics, dlq, source, table)


# -- checks -------------------------------------------------------------------------


def check_sides(name: str, left: TopicArg, right: TopicArg) -> tuple[str, str, dict[str, int]]:
    """The two sides' topic names and their declared partition counts.

    Raises:
        JoinConfigError: a side is not exactly one topic, both sides are the
            same topic, or their declared partition counts differ.
    """
    left_topic = _topic_name(left)
    right_topic = _topic_name(right)
    if left_topic == right_topic:
        raise JoinConfigError(f"join {name!r}: cannot join topic {left_topic!r} with itself")
    counts = {
        t: n for t, n in ((left_topic, _declared(left)), (right_topic, _declared(right))) if n
    }
    problems = copartition_problems(counts, [(left_topic, right_topic)])
    if problems:
        raise problems[0]
    return left_topic, right_topic, counts


def join_partitions(app: AppT, partitions: int | None, counts: Mapping[str, int]) -> int:
    """The join's partition count: given, else declared by a side, else the app's default."""
    found: int = partitions or next(iter(counts.values()), None) or app.conf.topic_partitions
    return found


def check_batching(name: str, max_idle_ms: int, batch_max: int, batch_interval: float) -> None:
    """Raise :class:`JoinConfigError` unless the batching knobs are in range."""
    if max_idle_ms < 0 or batch_max < 1 or batch_interval <= 0:
        raise JoinConfigError(
            f"join {name!r}: max_idle_ms must be >= 0, batch_max >= 1, batch_interval > 0"
        )


def check_record_limit(name: str, max_record_bytes: int) -> int:
    """*max_record_bytes* if it is a whole number of bytes, at least 1 KiB."""
    if isinstance(max_record_bytes, bool) or not isinstance(max_record_bytes, int):
        raise JoinConfigError(f"join {name!r}: max_record_bytes must be an int of bytes")
    if max_record_bytes < 1024:
        raise JoinConfigError(
            f"join {name!r}: max_record_bytes must be at least 1024, got {max_record_bytes}"
        )
    return max_record_bytes


def check_table_manager(app: AppT, name: str) -> None:
    """Raise :class:`JoinConfigError` unless *app* restores tables with streamjoin's manager."""
    from streamjoin.faust.restore.tables import TableManager

    manager = app.conf.TableManager
    if not (isinstance(manager, type) and issubclass(manager, TableManager)):
        raise JoinConfigError(
            f"join {name!r} needs streamjoin's table restoration: create the app with "
            "streamjoin.App, or pass TableManager='streamjoin:TableManager' to faust.App"
        )


def check_outputs(
    name: str, policy: JoinPolicy, outputs: Mapping[str, TopicArg] | None
) -> dict[str, TopicArg]:
    """The output overrides, after checking that the policy emits every one of them."""
    wanted = dict(outputs or {})
    unknown = sorted(set(wanted) - set(policy.outputs))
    if unknown:
        raise JoinConfigError(
            f"join {name!r}: unknown outputs {unknown}; the policy emits {list(policy.outputs)}"
        )
    return wanted


# -- declarations -------------------------------------------------------------------


def declare_outputs(
    app: AppT, name: str, policy: JoinPolicy, wanted: Mapping[str, TopicArg]
) -> dict[str, TopicT]:
    """Output name -> faust topic, for every output of *policy* (default ``<name>-<output>``)."""
    outputs: dict[str, TopicT] = {}
    for out in policy.outputs:
        target = wanted.get(out, f"{name}-{out}")
        outputs[out] = app.topic(target, **RAW) if isinstance(target, str) else target
    return outputs


def declare_dead_letters(app: AppT, name: str, dead_letters: TopicArg | None) -> TopicT:
    """The dead-letter topic (default ``<name>-dead-letters``)."""
    dlq = dead_letters if dead_letters is not None else f"{name}-dead-letters"
    return app.topic(dlq, **RAW) if isinstance(dlq, str) else dlq


def declare_source(app: AppT, left_topic: str, right_topic: str, partitions: int) -> TopicT:
    """The one faust topic the join's agent reads both sides from."""
    return app.topic(left_topic, right_topic, partitions=partitions, **RAW)


def declare_state_table(app: AppT, name: str, partitions: int) -> TableT[bytes, bytes]:
    """The join's state table ``<name>-state`` (bytes to bytes, changelogged,
    fenced: see :mod:`streamjoin.restore.owner_tokens`)."""
    table = app.Table(
        f"{name}-state",
        partitions=partitions,
        key_type=bytes,
        value_type=bytes,
        help=f"state of join {name}",
        options={"write_buffer_size": STATE_WRITE_BUFFER_BYTES},
    )
    # streamjoin's mark on a faust table (read by is_fenced through getattr)
    table.streamjoin_fenced = True  # type: ignore[attr-defined]
    return table


def declare_copartitioned(app: AppT, topics: tuple[str, ...]) -> None:
    """Tell the assignor that *topics* form one co-partitioned group."""
    groups = list(getattr(app, "copartitioned_topics", ()))
    groups.append(topics)
    # streamjoin's note on a faust app (read by declared_topics through getattr)
    app.copartitioned_topics = groups  # type: ignore[attr-defined]


def _topic_name(topic: TopicArg) -> str:
    if isinstance(topic, str):
        return topic
    names = list(getattr(topic, "topics", ()) or ())
    if len(names) != 1 or getattr(topic, "pattern", None):
        raise JoinConfigError(f"a join side must be one topic, got {topic!r}")
    return str(names[0])


def _declared(topic: TopicArg) -> int | None:
    return None if isinstance(topic, str) else getattr(topic, "partitions", None)
