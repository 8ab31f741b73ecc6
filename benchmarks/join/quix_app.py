"""The join benchmark's Quix Streams pass: an interval join of impressions and clicks.

A ``quixstreams.Application`` in a consumer group of its own reads both input topics
from the earliest offset (keys: the auction id, as bytes; values: JSON; event time:
the Kafka record timestamp, which the generator sets to ``ts_ms``) and joins them with
``StreamingDataFrame.join_interval``: a click matches the impressions of its auction
at most ``--window-ms`` (the ad app's 30 minutes) before it and none after
(``backward_ms=0``, ``forward_ms=window``). The matches go to an output topic, as the
ad app's outcomes do. Quix's state is RocksDB with changelog topics (its defaults,
at-least-once).

Quix's ``grace_ms`` is not the ad app's grace: it is how long a key's records stay in
the store behind the newest record of that key. Here it is ``--grace-ms`` (the ad
app's 10 s); every auction has one impression, so it never drops a match.

Topics Quix creates (its changelogs, the output topic) get ``retention.ms`` explicitly
(``--retention-ms``, default -1: keep everything): Quix derives a changelog's config
from its input topics' ``retention.ms``, and the embedded broker does not report one
for topics created without it.

The count of input records processed (Quix's ``on_message_processed``, once per
record after its whole pipeline ran) and of join matches are served at
``GET /bench/count/`` on loopback. The app runs until it is stopped, or
``--timeout`` seconds at most.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence
from typing import Any

from benchmarks.harness.counter import serve_counts
from streamjoin.ads.policy import ATTRIBUTION_WINDOW_MS


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.join.quix_app")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--port", type=int, required=True, help="loopback port of the count")
    p.add_argument("--impressions", required=True, help="impressions topic")
    p.add_argument("--clicks", required=True, help="clicks topic")
    p.add_argument("--output", required=True, help="topic of the joined records")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--window-ms", type=int, default=ATTRIBUTION_WINDOW_MS)
    p.add_argument("--grace-ms", type=int, default=10_000)
    p.add_argument("--retention-ms", default="-1")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds, at most")
    return p.parse_args(argv)


def joined(impression: Any, click: Any) -> dict[str, Any]:
    """A match: a new record (Quix's mergers must not change their inputs)."""
    return {
        "auction_id": click["auction_id"],
        "click_id": click["click_id"],
        "campaign": impression["campaign"],
        "cost": impression["cost"],
        "ts_ms": click["ts_ms"],
    }


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    from quixstreams import Application
    from quixstreams.models import TopicConfig

    counts = {"processed": 0, "joined": 0}

    def processed(topic: str, partition: int, offset: int) -> None:
        counts["processed"] += 1

    def matched(_value: Any) -> None:
        counts["joined"] += 1

    # every topic Quix creates: retention.ms set (the embedded broker reports none)
    extra = {"retention.ms": str(args.retention_ms), "retention.bytes": "-1"}
    created = TopicConfig(num_partitions=args.partitions, replication_factor=1, extra_config=extra)
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        on_message_processed=processed,
        loglevel="INFO",
    )

    def source(name: str) -> Any:
        return app.dataframe(
            app.topic(name, key_deserializer="bytes", value_deserializer="json", config=created)
        )

    impressions, clicks = source(args.impressions), source(args.clicks)
    out = app.topic(args.output, key_serializer="bytes", value_serializer="json", config=created)
    matches = impressions.join_interval(
        clicks,
        how="inner",
        on_merge=joined,
        grace_ms=args.grace_ms,
        backward_ms=0,
        forward_ms=args.window_ms,
    )
    matches.update(matched).to_topic(out)

    serve_counts(args.port, counts)
    timer = threading.Timer(args.timeout, app.stop)  # bounded: stop after --timeout
    timer.daemon = True
    timer.start()
    app.run()


if __name__ == "__main__":
    main()
