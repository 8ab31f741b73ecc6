"""Restore throughput: streamjoin's table restoration vs faust's built-in recovery.

One run, one embedded broker, one changelog: the changelog of a RocksDB table
is written with ``--records`` records; then, one after the other and each with
an empty data directory, a worker with streamjoin's ``TableManager`` and a
worker with faust's own recovery restore it. The restore time of each is read
from its own log (first to last restore line) and the records/s are printed
side by side with the ratio.

Changelog layout (``--layout``):

* ``batched`` (default): large batches, except that each partition's last
  record is written alone, so the embedded broker's ``ListOffsets(latest)``
  is exact and faust's recovery can finish.
* ``single``: one record per batch. The embedded broker (Tansu 0.6.0, memory
  storage) serves such logs slowly and degrades with their size: about 25-40k
  records/s at 100k records, about 1k records/s at 1M, for any client. Use it
  with ``--records 100000``.

    python benchmarks/restore.py [--records 1000000] [--partitions 8] [--layout batched]
                                 [--owner-headers]

``--owner-headers`` writes every record with an owner token header, as a
join's fenced changelog is written (see ``streamjoin.restore.ownership``):
streamjoin's restore then reads every record's headers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness.kafka import create_topics
from benchmarks.harness.workers import embedded_broker, exit_on_sigterm, running, worker
from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.restore.ownership import OWNER_HEADER

APP_ID = "bench-restore"
TOPIC = f"{APP_ID}-state-changelog"

#: a restore worker gets this long to stop before it is killed
STOP_TIMEOUT_S = 20.0

# first and last log line of each restore
MARKERS = {
    "streamjoin": (r"restoring \d+ changelog partition", r"tables restored:"),
    "faust": (r"Restoring state from changelog topics", r"Done reading from changelog topics"),
}
_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


@dataclass(frozen=True)
class Result:
    """One restore measurement."""

    name: str
    records: int
    seconds: float

    @property
    def rate(self) -> float:
        """Records restored per second."""
        return self.records / self.seconds if self.seconds > 0 else float("inf")


async def write_changelog(
    bootstrap: str,
    records: int,
    partitions: int,
    value_size: int,
    layout: str,
    owner_headers: bool = False,
) -> float:
    """Write *records* JSON records to the changelog; return the seconds taken.

    *owner_headers*: every record carries an owner token header, as a join's
    fenced changelog does (streamjoin's restore reads each record's headers).

    ``layout="single"``: every record in its own batch. ``layout="batched"``:
    large batches, except that each partition's last record is written alone,
    so ``ListOffsets(latest)`` is right on the embedded broker and faust's
    recovery can finish either way.
    """
    from aiokafka import AIOKafkaProducer

    await create_topics(bootstrap, [TOPIC], partitions)
    value = json.dumps("v" * value_size).encode()
    key_space = max(1, records // 2)
    record_size = len(value) + 40
    if layout == "single":
        # max_batch_size below two records: every batch holds exactly one
        options = {"linger_ms": 0, "max_batch_size": record_size}
    else:
        options = {"linger_ms": 20, "max_batch_size": 512 * 1024}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, **options)
    await producer.start()
    started = time.monotonic()
    tail_from = records - min(records, partitions) if layout == "batched" else records
    headers = [(OWNER_HEADER, b"bench-owner")] if owner_headers else None
    try:
        window: list[asyncio.Future[object]] = []
        for i in range(records):
            key = json.dumps(f"key-{i % key_space:09d}").encode()
            future = await producer.send(
                TOPIC, value, key=key, partition=i % partitions, headers=headers
            )
            if i >= tail_from:
                await asyncio.gather(*window)
                window.clear()
                await future  # alone in its batch
                continue
            window.append(future)
            if len(window) >= 50_000:
                await asyncio.gather(*window)
                window.clear()
        await asyncio.gather(*window)
    finally:
        await producer.stop()
    return time.monotonic() - started


def _timestamp(line: str) -> float:
    match = _TS.match(line)
    if match is None:
        raise ValueError(f"no timestamp in log line: {line!r}")
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def measure(
    name: str, broker: EmbeddedBroker, workdir: Path, records: int, timeout: float
) -> Result:
    """Restore the changelog with one worker and time it from its log."""
    first, last = MARKERS[name]
    env = {"SJ_BENCH_MANAGER": name, "SJ_BENCH_APP_ID": APP_ID}
    process = worker("restore_app:app", broker, workdir, name, env=env)
    with running(process, stop_timeout=STOP_TIMEOUT_S):
        begin = process.wait_for_log(first, timeout)[0]
        end = process.wait_for_log(last, timeout)[0]
    return Result(name, records, _timestamp(end) - _timestamp(begin))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=900.0, help="per restore, seconds")
    parser.add_argument(
        "--layout",
        choices=["batched", "single"],
        default="batched",
        help="batched: big batches, each partition's last record alone (default); "
        "single: one record per batch (the embedded broker serves these slowly: "
        "use --records 100000)",
    )
    parser.add_argument("--skip-faust", action="store_true", help="measure streamjoin only")
    parser.add_argument(
        "--owner-headers",
        action="store_true",
        help="every record with an owner token header, as a join's fenced changelog",
    )
    args = parser.parse_args(argv)
    exit_on_sigterm()
    os.environ["SJ_BENCH_PARTITIONS"] = str(args.partitions)
    with (
        tempfile.TemporaryDirectory(prefix="sj-bench-restore-") as tmp,
        embedded_broker() as broker,
    ):
        workdir = Path(tmp)
        headed = ", owner headers" if args.owner_headers else ""
        print(
            f"writing {args.records:,} changelog records ({args.layout} layout, "
            f"{args.partitions} partitions{headed}) ...",
            flush=True,
        )
        took = asyncio.run(
            write_changelog(
                broker.bootstrap,
                args.records,
                args.partitions,
                args.value_size,
                args.layout,
                args.owner_headers,
            )
        )
        print(f"  written in {took:.1f}s", flush=True)
        results = [measure("streamjoin", broker, workdir, args.records, args.timeout)]
        if not args.skip_faust:
            results.append(measure("faust", broker, workdir, args.records, args.timeout))

    print()
    print(f"{'restore':<12} {'records':>10} {'seconds':>9} {'records/s':>12}")
    for r in results:
        print(f"{r.name:<12} {r.records:>10,} {r.seconds:>9.2f} {r.rate:>12,.0f}")
    ours = results[0]
    ok = ours.rate >= 100_000
    if len(results) > 1:
        ratio = ours.rate / results[1].rate
        print(f"\nstreamjoin / faust: {ratio:.1f}x (target >= 3x)")
        ok = ok and ratio >= 3.0
    verdict = "met" if ours.rate >= 100_000 else "MISSED"
    print(f"streamjoin rate target >= 100,000 records/s: {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
