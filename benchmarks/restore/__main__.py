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

    python -m benchmarks.restore [--records 1000000] [--partitions 8] [--layout batched]
                                 [--owner-headers]

``--owner-headers`` writes every record with an owner token header, as a
join's fenced changelog is written (see ``streamjoin.restore.owner_tokens``):
streamjoin's restore then reads every record's headers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from benchmarks.harness import kafka
from benchmarks.harness.report import render_table, say, verdict
from benchmarks.harness.workers import (
    embedded_broker,
    exit_on_sigterm,
    run_directory,
    running,
    worker,
)
from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.restore.owner_tokens import OWNER_HEADER

#: the worker both restores run (``SJ_BENCH_MANAGER`` picks the table manager)
APP = "benchmarks.restore.app:app"
APP_ID = "bench-restore"
TOPIC = f"{APP_ID}-state-changelog"

#: streamjoin's records/s, and its rate over faust's
RATE_TARGET = 100_000
RATIO_TARGET = 3.0
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
    large batches, except that each partition's last record is written alone
    (see :func:`benchmarks.harness.kafka.write_changelog`).
    """
    key_space = max(1, records // 2)
    return await kafka.write_changelog(
        bootstrap,
        TOPIC,
        partitions,
        records,
        json.dumps("v" * value_size).encode(),
        lambda i: json.dumps(f"key-{i % key_space:09d}").encode(),
        one_per_batch=layout == "single",
        headers=[(OWNER_HEADER, b"bench-owner")] if owner_headers else None,
    )


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
    process = worker(APP, broker, workdir, name, env=env)
    with running(process, stop_timeout=STOP_TIMEOUT_S):
        begin = process.wait_for_log(first, timeout)[0]
        end = process.wait_for_log(last, timeout)[0]
    return Result(name, records, _timestamp(end) - _timestamp(begin))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.restore", description=__doc__.splitlines()[0]
    )
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
    with run_directory("sj-bench-restore-") as workdir, embedded_broker() as broker:
        headed = ", owner headers" if args.owner_headers else ""
        say(
            f"writing {args.records:,} changelog records ({args.layout} layout, "
            f"{args.partitions} partitions{headed}) ..."
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
        say(f"  written in {took:.1f}s")
        results = [measure("streamjoin", broker, workdir, args.records, args.timeout)]
        if not args.skip_faust:
            results.append(measure("faust", broker, workdir, args.records, args.timeout))
    say()
    rows = [[r.name, f"{r.records:,}", f"{r.seconds:.2f}", f"{r.rate:,.0f}"] for r in results]
    say(render_table(["restore", "records", "seconds", "records/s"], rows))
    ours = results[0]
    ok = ours.rate >= RATE_TARGET
    if len(results) > 1:
        ratio = ours.rate / results[1].rate
        say()
        say(
            f"streamjoin / faust: {ratio:.1f}x (target >= {RATIO_TARGET:g}x): "
            f"{verdict(ratio >= RATIO_TARGET)}"
        )
        ok = ok and ratio >= RATIO_TARGET
    say(f"streamjoin rate target >= {RATE_TARGET:,} records/s: {verdict(ours.rate >= RATE_TARGET)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
