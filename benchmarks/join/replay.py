"""A join's runtime replayed in one process: records through the router and RocksDB, no broker.

What a worker does to a batch between the fetch and the producer, with
everything but Kafka real: each task's :class:`~streamjoin.faust.join.tasks.JoinTask`
on a real RocksDB database, its records staged by the
:class:`~streamjoin.faust.join.router.RecordRouter` and committed by
:meth:`BatchState.commit`, batch after batch. Used by

* the golden test (``tests/unit/faust/test_join_golden.py``): the same seeded
  input must give byte-identical outputs whatever the join's internals;
* the profile in docs/benchmarks.rst (``python -m benchmarks.join.replay
  --impressions 200000 --profile``): where a record's time goes, without the
  broker's and the producer's share.

Arrival: the generator's production order, each partition's records in fetch
chunks of at most ``chunk`` records of one topic (a new chunk where the topic
changes), ``batch_max`` records per task per batch; ``order="left-first"``
delivers every left record of a partition before any right one (one input
fetched entirely before the other). At the end both inputs go idle, which
decides everything pending.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamjoin.ads.generator import GeneratorConfig, generate
from streamjoin.ads.generator.core import partition_for_key
from streamjoin.ads.policy import AdAttribution
from streamjoin.faust.join.router import RecordRouter
from streamjoin.faust.join.stats import JoinStats
from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.join.types import LEFT, RIGHT, Fetched, Output
from streamjoin.join.policy import JoinPolicy
from streamjoin.join.window import JoinWindow
from streamjoin.join.windowed import JoinKind, WindowedJoinPolicy

__all__ = ["CASES", "Replay", "golden_digest", "policy_for", "replay"]

OFFSET_KEY = b"__faust\0offset__"
LEFT_TOPIC, RIGHT_TOPIC = "impressions", "clicks"
DEAD_LETTERS = "dead-letters"


def policy_for(name: str) -> JoinPolicy:
    """The policy a case names: ``ads`` (the app's window), ``ads-short`` (a 20 s
    window: most state expires within a run) or a windowed ``inner``/``left``/``outer``
    join."""
    if name == "ads":
        return AdAttribution(JoinWindow(before=0, after=30 * 60 * 1000, grace=10_000))
    if name == "ads-short":
        return AdAttribution(JoinWindow(before=0, after=20_000, grace=5_000))
    kind = {"inner": JoinKind.INNER, "left": JoinKind.LEFT, "outer": JoinKind.OUTER}[name]
    return WindowedJoinPolicy(kind, JoinWindow(before=2_000, after=60_000, grace=3_000))


#: the golden cases: (policy, seed, impressions, impressions per second, arrival order)
CASES: tuple[tuple[str, int, int, float, str], ...] = (
    ("ads", 1, 3_000, 100.0, "fetch"),
    ("ads", 2, 3_000, 100.0, "left-first"),
    ("ads-short", 3, 6_000, 20.0, "fetch"),
    ("ads-short", 4, 6_000, 20.0, "left-first"),
    ("inner", 5, 3_000, 20.0, "fetch"),
    ("left", 6, 3_000, 20.0, "left-first"),
    ("outer", 7, 3_000, 20.0, "fetch"),
)


@dataclass
class Replay:
    """What a replay produced."""

    outputs: list[Output] = field(default_factory=list)
    #: changelog records written (content and positions), over all tasks
    changelog_records: int = 0
    input_records: int = 0
    batches: int = 0
    seconds: float = 0.0
    #: this process' CPU seconds over the same span (steadier on a busy machine)
    cpu_seconds: float = 0.0


def _arrivals(
    config: GeneratorConfig, chunk: int, order: str
) -> dict[int, list[tuple[str, list[Fetched]]]]:
    """Per partition: its records as fetch chunks (side, records) in arrival order."""
    offsets: dict[tuple[str, int], int] = {}
    per_partition: dict[int, list[tuple[str, Fetched]]] = {}
    for event in generate(config):
        side = LEFT if event.topic == config.impressions_topic else RIGHT
        partition = partition_for_key(event.key, config.partitions)
        offset = offsets.get((event.topic, partition), 0)
        offsets[(event.topic, partition)] = offset + 1
        record = Fetched(event.topic, partition, offset, event.key, event.value, event.timestamp_ms)
        per_partition.setdefault(partition, []).append((side, record))
    out: dict[int, list[tuple[str, list[Fetched]]]] = {}
    for partition, records in sorted(per_partition.items()):
        if order == "left-first":
            records = [r for r in records if r[0] == LEFT] + [r for r in records if r[0] == RIGHT]
        chunks: list[tuple[str, list[Fetched]]] = []
        for side, record in records:
            if chunks and chunks[-1][0] == side and len(chunks[-1][1]) < chunk:
                chunks[-1][1].append(record)
            else:
                chunks.append((side, [record]))
        out[partition] = chunks
    return out


def _batches(
    chunks: list[tuple[str, list[Fetched]]], per_batch: int
) -> Iterator[list[tuple[str, list[Fetched]]]]:
    """Whole chunks, about *per_batch* records a batch (as fetches arrive between batches)."""
    batch: list[tuple[str, list[Fetched]]] = []
    n = 0
    for item in chunks:
        batch.append(item)
        n += len(item[1])
        if n >= per_batch:
            yield batch
            batch, n = [], 0
    if batch:
        yield batch


def replay(
    policy_name: str,
    seed: int,
    impressions: int,
    order: str = "fetch",
    *,
    rate: float = 100.0,
    partitions: int = 2,
    chunk: int = 500,
    batch_max: int = 2_000,
    malformed_rate: float = 0.002,
    workdir: Path | None = None,
    profiler: Any = None,
) -> Replay:
    """Replay the generator's run through the join's runtime; see the module docstring."""
    from rocksdict import Options, Rdict

    config = GeneratorConfig(
        seed=seed,
        impressions=impressions,
        rate=rate,
        partitions=partitions,
        malformed_rate=malformed_rate,
        impressions_topic=LEFT_TOPIC,
        clicks_topic=RIGHT_TOPIC,
    )
    policy = policy_for(policy_name)
    outputs = {name: f"out-{name}" for name in policy.outputs}
    arrivals = _arrivals(config, chunk, order)
    result = Replay()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        router = RecordRouter("replay", policy, JoinStats(), outputs, DEAD_LETTERS)
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter()
        cpu_start = time.process_time()
        for partition, chunks in arrivals.items():
            db = Rdict(f"{tmp}/p{partition}", options=Options(raw_mode=True))
            task = JoinTask(partition, policy, max_idle_ms=2_000)
            task.open(db, 0)
            changelog_offset = 0
            batches = list(_batches(chunks, batch_max))
            for n, received in enumerate(batches):
                for side, records in received:
                    task.receive(side, records, 0)
                    result.input_records += len(records)
                idle = [LEFT, RIGHT] if n == len(batches) - 1 else []
                result.outputs.extend(router.stage(task, task.take_inbox(), idle))
                written = len(task.state.content)
                result.changelog_records += written
                changelog_offset += written
                task.state.commit(OFFSET_KEY, changelog_offset - 1)
                result.batches += 1
            db.close()
        result.seconds = time.perf_counter() - start
        result.cpu_seconds = time.process_time() - cpu_start
        if profiler is not None:
            profiler.disable()
    return result


def golden_digest(outputs: Sequence[Output]) -> dict[str, Any]:
    """The outputs as counts per topic and one sha256 over every record, sorted
    (byte-identical records, whatever order a batch emitted them in)."""
    digest = hashlib.sha256()
    counts: dict[str, int] = {}
    for topic, key, value, headers in sorted(outputs, key=repr):
        counts[topic] = counts.get(topic, 0) + 1
        digest.update(repr((topic, key, value, headers)).encode())
    return {"records": len(outputs), "per_topic": dict(sorted(counts.items())),
            "sha256": digest.hexdigest()}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.join.replay", description=__doc__)
    parser.add_argument(
        "--policy", default="ads", choices=["ads", "ads-short", "inner", "left", "outer"]
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--impressions", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--order", default="fetch", choices=["fetch", "left-first"])
    parser.add_argument("--profile", action="store_true", help="print cProfile's top entries")
    parser.add_argument(
        "--golden", action="store_true", help="print the golden cases' digests as JSON"
    )
    args = parser.parse_args(argv)
    if args.golden:
        doc = {
            f"{p}-{s}-{n}-{o}": golden_digest(replay(p, s, n, o, rate=r).outputs)
            for p, s, n, r, o in CASES
        }
        print(json.dumps(doc, indent=1, sort_keys=True))
        return

    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    result = replay(
        args.policy,
        args.seed,
        args.impressions,
        args.order,
        partitions=args.partitions,
        profiler=profiler,
    )
    if profiler is not None:
        import pstats

        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    print(
        f"{result.input_records:,} input records in {result.seconds:.2f} s: "
        f"{result.input_records / result.seconds:,.0f} records/s, "
        f"{result.seconds / result.input_records * 1e6:.1f} us/record "
        f"({result.cpu_seconds / result.input_records * 1e6:.1f} us of CPU); "
        f"{result.changelog_records / result.input_records:.2f} changelog records per input; "
        f"{len(result.outputs):,} outputs, {result.batches} batches"
    )


if __name__ == "__main__":
    main()
