"""The generator's command line: ``python -m streamjoin.ads.generator``.

Parses the flags into a :class:`~streamjoin.ads.generator.config.GeneratorConfig`,
runs :func:`streamjoin.ads.generator.producer.run` and reports every outcome
as one line on stderr with an exit code (see :func:`main`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from aiokafka.errors import KafkaError

from streamjoin.ads.generator.config import GeneratorConfig, GeneratorConfigError
from streamjoin.ads.generator.producer import CliError, run, short
from streamjoin.ads.topics import AdTopics

__all__ = ["PROG", "CliError", "bootstrap_servers", "config_from_args", "main"]

PROG: Final = "generator"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own prints the whole usage
        raise CliError(f"{message} (see --help)")


# long because: the argument parser, one add() per option in the order --help lists them
def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m streamjoin.ads.generator",
        description="Produce a seeded, reproducible stream of ad impressions and clicks "
        "(see examples/ad_monetization/README.md).",
        allow_abbrev=False,
    )
    d = GeneratorConfig(duration_ms=60_000)
    add = p.add_argument
    add(
        "--bootstrap",
        required=True,
        help="host:port of a Kafka broker, or several separated by commas (kafka:// optional)",
    )
    add("--seed", type=int, default=d.seed, help="the run's seed (ids contain it) [%(default)s]")
    span = p.add_mutually_exclusive_group()
    span.add_argument("--duration", type=float, help="seconds of event time [60]")
    span.add_argument("--impressions", type=int, help="exactly this many impressions")
    add(
        "--rate",
        type=float,
        default=d.rate,
        help="impressions per second of event time [%(default)s]",
    )
    add(
        "--partitions",
        type=int,
        default=d.partitions,
        help="partitions of both topics [%(default)s]",
    )
    add(
        "--speed",
        type=float,
        default=0.0,
        help="event-time ms per wall ms (0: no pacing) [%(default)s]",
    )
    add("--record", type=Path, help="also write every produced record to this JSON-lines file")
    add(
        "--tail",
        action=argparse.BooleanOptionalAction,
        default=d.tail,
        help="emit the tail [%(default)s]",
    )
    add(
        "--tail-ms",
        type=int,
        default=d.tail_ms,
        help="tail event time after the span's end [%(default)s]",
    )
    add("--campaigns", type=int, default=d.campaigns, help="number of campaigns [%(default)s]")
    add("--ctr", type=float, default=d.ctr, help="share of impressions clicked [%(default)s]")
    add(
        "--dup-rate",
        type=float,
        default=d.dup_rate,
        help="share of clicks duplicated [%(default)s]",
    )
    add(
        "--orphan-rate",
        type=float,
        default=d.orphan_rate,
        help="share of clicks w/o impression [%(default)s]",
    )
    add(
        "--late-click-rate",
        type=float,
        default=d.late_click_rate,
        help="share of clicks 30-45 min after the impression [%(default)s]",
    )
    add(
        "--jitter-ms",
        type=int,
        default=d.jitter_ms,
        help="max arrival delay (out of order) [%(default)s]",
    )
    add(
        "--malformed-rate",
        type=float,
        default=d.malformed_rate,
        help="share of broken records [%(default)s]",
    )
    add(
        "--start-ts-ms",
        type=int,
        default=d.start_ts_ms,
        help="event time of the span's start [%(default)s]",
    )
    add(
        "--topic-prefix", default="", help="prefix of both topic names (the app's ADS_TOPIC_PREFIX)"
    )
    add("--impressions-topic", help="impressions topic name [PREFIX + impressions]")
    add("--clicks-topic", help="clicks topic name [PREFIX + clicks]")
    add(
        "--create-topics",
        action="store_true",
        help="create missing topics with --partitions partitions (replication 1)",
    )
    return p


def config_from_args(args: argparse.Namespace) -> GeneratorConfig:
    """Build the :class:`GeneratorConfig` the parsed command line asks for."""
    if args.impressions is not None:
        span: dict[str, int | None] = {"impressions": args.impressions}
    else:
        seconds = 60.0 if args.duration is None else args.duration
        if not (math.isfinite(seconds) and seconds > 0):
            raise CliError(f"--duration: must be a positive number of seconds, got {seconds!r}")
        span = {"duration_ms": round(seconds * 1000)}
    topics = AdTopics(args.topic_prefix)
    return GeneratorConfig(
        seed=args.seed,
        rate=args.rate,
        campaigns=args.campaigns,
        ctr=args.ctr,
        dup_rate=args.dup_rate,
        orphan_rate=args.orphan_rate,
        late_click_rate=args.late_click_rate,
        jitter_ms=args.jitter_ms,
        malformed_rate=args.malformed_rate,
        start_ts_ms=args.start_ts_ms,
        tail=args.tail,
        partitions=args.partitions,
        tail_ms=args.tail_ms,
        impressions_topic=args.impressions_topic or topics.impressions,
        clicks_topic=args.clicks_topic or topics.clicks,
        **span,
    )


def _say(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def bootstrap_servers(raw: str) -> str:
    """``--bootstrap`` as aiokafka takes it: comma-separated ``host:port``, no ``kafka://``."""
    return ",".join(part.strip().removeprefix("kafka://") for part in raw.split(","))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the generator CLI; return its exit code.

    0: done; 1: a send failed mid-run; 2: bad arguments, no broker, or topics
    missing or with another partition count; 130: interrupted.
    """
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # we report failures ourselves
    try:
        args = _parser().parse_args(argv)
        if not (math.isfinite(args.speed) and args.speed >= 0):
            raise CliError(f"--speed must be >= 0, got {args.speed}")
        if args.record is not None and not args.record.parent.is_dir():
            raise CliError(f"--record: directory {str(args.record.parent)!r} does not exist")
        config = config_from_args(args)
        progress = asyncio.run(
            run(
                bootstrap_servers(args.bootstrap),
                config,
                create_topics=args.create_topics,
                speed=args.speed,
                record=args.record,
                say=_say,
            )
        )
        _say(progress.summary())
    except GeneratorConfigError as exc:
        flag = "--duration" if exc.field == "duration_ms" else "--" + exc.field.replace("_", "-")
        _say(f"error: {flag}: {exc.problem}")
        return 2
    except KafkaError as exc:
        _say(f"error: broker: {short(exc)}")
        return 2
    except CliError as exc:
        _say(f"error: {exc}")
        return exc.code
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    return 0
