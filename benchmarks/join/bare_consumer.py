"""The join benchmark's ceiling: a bare aiokafka consumer reading the backlog, nothing else.

One ``AIOKafkaConsumer`` in a consumer group of its own (``auto_offset_reset=earliest``)
subscribes to both input topics and counts what ``getmany`` returns, in large batches;
no decoding, no processing. The count is served at ``GET /bench/count/`` (loopback) so
the harness polls it exactly as it polls the other passes.

It reads until it has counted ``--expected`` records or ``--timeout`` seconds have
passed, then waits (serving its count) until it is stopped or ``--timeout`` is up.

    python -m benchmarks.join.bare_consumer --bootstrap 127.0.0.1:9092 --group g \\
        --port 8123 --expected 980000 TOPIC [TOPIC ...]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence

from benchmarks.harness.counter import serve_counts

#: records per ``getmany`` call at most
MAX_RECORDS = 100_000


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.join.bare_consumer")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--port", type=int, required=True, help="loopback port of the count")
    p.add_argument("--expected", type=int, required=True, help="records to read, then idle")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds, at most")
    p.add_argument("--max-records", type=int, default=MAX_RECORDS)
    p.add_argument("topics", nargs="+")
    return p.parse_args(argv)


async def consume(args: argparse.Namespace, counts: dict[str, int]) -> None:
    from aiokafka import AIOKafkaConsumer

    deadline = time.monotonic() + args.timeout
    consumer = AIOKafkaConsumer(
        *args.topics,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        fetch_max_bytes=64 * 2**20,
        max_partition_fetch_bytes=16 * 2**20,
    )
    await consumer.start()
    try:
        while counts["processed"] < args.expected and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500, max_records=args.max_records)
            counts["processed"] += sum(len(records) for records in batches.values())
        # idle, still serving the count, until the harness stops this process
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
    finally:
        await consumer.stop()


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    counts = {"processed": 0}
    serve_counts(args.port, counts)
    asyncio.run(consume(args, counts))


if __name__ == "__main__":
    main()
