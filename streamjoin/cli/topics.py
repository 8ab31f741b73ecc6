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
    help="Broker URL(s), e.g. kafka://127.0.0.1:9092, comma-separated (default: the app's).",
)
@click.option(
    "--timeout", type=float, default=15.0, show_default=True, help="Seconds to wait for the broker."
)
def check_command(app_spec: str, broker: str | None, timeout: float) -> None:
    """Check partition counts against the app: every co-partitioned (joined) group
    must have equal counts, and every topic the count the app declares.

    Exit status 0 when everything fits, 1 with one line per problem otherwise.
    """
    from streamjoin.errors import StreamjoinError
    from streamjoin.faust.kafka.checks import topic_problems
    from streamjoin.faust.kafka.metadata import declared_topics, partition_counts
    from streamjoin.worker.options import broker_urls
    from streamjoin.worker.run import check_broker, load_app

    try:
        app = load_app(app_spec)
        if broker is not None:
            app.conf.broker = broker_urls(broker)
        check_broker(list(app.conf.broker), timeout)
        declared = declared_topics(app)
        counts = partition_counts(app.conf, declared.partitions, timeout)
    except StreamjoinError as exc:
        raise click.ClickException(str(exc)) from None
    width = max((len(t) for t in declared.partitions), default=5)
    click.echo(f"{'topic':<{width}}  declared  broker")
    for topic, wanted in declared.partitions.items():
        have = counts.get(topic)
        shown_have = "missing" if have is None else str(have)
        click.echo(f"{topic:<{width}}  {wanted if wanted else '-':>8}  {shown_have:>6}")
    for group in declared.copartition:
        click.echo(f"co-partitioned: {' + '.join(group)}")
    problems = topic_problems(declared, counts)
    if problems:
        for problem in problems:
            click.echo(f"error: {problem}", err=True)
        raise SystemExit(1)
    click.echo("ok: partition counts fit the app")
