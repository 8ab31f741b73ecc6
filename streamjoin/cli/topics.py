"""``streamjoin topics check``: do the broker's topics fit the app?"""

from __future__ import annotations

import click

__all__ = ["topics_command"]


@click.group("topics")
def topics_command() -> None:
    """Inspect the app's topics on the broker."""


@topics_command.command("check")
@click.option(
    "-A",
    "--app",
    "app_spec",
    required=True,
    metavar="MODULE:APP",
    help="The app whose topics to check, e.g. myproj.app:app.",
)
@click.option(
    "-b",
    "--broker",
    metavar="URL",
    help="Broker URL, e.g. kafka://127.0.0.1:9092 (default: the app's).",
)
@click.option(
    "--timeout", type=float, default=15.0, show_default=True, help="Seconds to wait for the broker."
)
def check_command(app_spec: str, broker: str | None, timeout: float) -> None:
    """Check partition counts against the app: every co-partitioned (joined) group
    must have equal counts, and every topic the count the app declares.

    Exit status 0 when everything fits, 1 with one line per problem otherwise.
    """
    from streamjoin.assignment.grouping import copartition_problems
    from streamjoin.errors import StreamjoinError
    from streamjoin.faust.metadata import broker_partition_counts, declared_topics
    from streamjoin.worker.run import check_broker, load_app

    try:
        app = load_app(app_spec)
        urls = [*app.conf.broker] if broker is None else _urls(broker)
        check_broker(urls, timeout)
    except StreamjoinError as exc:
        raise click.ClickException(str(exc)) from None
    declared = declared_topics(app)
    bootstrap = ",".join(f"{u.host}:{u.port or 9092}" for u in urls)
    counts = broker_partition_counts(bootstrap, declared.partitions, timeout)
    problems: list[str] = []
    width = max((len(t) for t in declared.partitions), default=5)
    click.echo(f"{'topic':<{width}}  declared  broker")
    for topic, wanted in declared.partitions.items():
        have = counts.get(topic)
        shown_have = "missing" if have is None else str(have)
        click.echo(f"{topic:<{width}}  {wanted if wanted else '-':>8}  {shown_have:>6}")
        if have is not None and wanted and have != wanted:
            problems.append(
                f"topic {topic!r} has {have} partitions on the broker but the app declares "
                f"{wanted}; recreate the topic with {wanted} partitions or change the app"
            )
    problems += [str(p) for p in copartition_problems(counts, declared.copartition)]
    for group in declared.copartition:
        click.echo(f"co-partitioned: {' + '.join(group)}")
    if problems:
        for line in problems:
            click.echo(f"error: {line}", err=True)
        raise SystemExit(1)
    click.echo("ok: partition counts fit the app")


def _urls(broker: str) -> list[object]:
    from yarl import URL

    return [URL(u if "://" in u else f"kafka://{u}") for u in broker.split(",")]
