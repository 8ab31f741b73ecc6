"""``streamjoin worker``: run an app's agents and tables in this process."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["worker_command"]


@click.command("worker")
@click.option(
    "-A",
    "--app",
    "app_spec",
    required=True,
    metavar="MODULE:APP",
    help="The app to run, e.g. myproj.app:app.",
)
@click.option(
    "-b",
    "--broker",
    metavar="URL",
    help="Broker URL(s), e.g. kafka://127.0.0.1:9092 (default: the app's).",
)
@click.option(
    "--datadir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Data directory; RocksDB state lives below it (default: the app's).",
)
@click.option(
    "--web-port",
    type=click.IntRange(1, 65535),
    help="Port of this worker's web server (default: the app's, or a free port "
    "instead of faust's 6066).",
)
@click.option("--web-host", help="Host name this worker advertises.")
@click.option("--web-bind", help="Interface the web server binds.")
@click.option(
    "--with-web/--without-web",
    "web",
    default=None,
    help="Force the web server on or off (default: the app's setting).",
)
@click.option(
    "--standby-replicas",
    type=click.IntRange(0, None),
    help="Standby replicas per table partition (faust's table_standby_replicas).",
)
@click.option(
    "-l",
    "--loglevel",
    default="info",
    show_default=True,
    type=click.Choice(["crit", "error", "warn", "warning", "info", "debug"], case_sensitive=False),
    help="Log level.",
)
@click.option("-f", "--logfile", help="Log to this file instead of stderr.")
@click.option("--debug/--no-debug", default=False, help="faust debug mode.")
@click.option(
    "--blocking-timeout",
    type=float,
    help="Seconds before a blocked event loop is reported (debug).",
)
@click.option(
    "--broker-timeout",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds to wait for the broker before giving up.",
)
@click.option("--rack", help="Rack or zone of this worker; standbys prefer other racks.")
@click.option(
    "--host-label", help="Host this worker runs on; no standby shares its active's host label."
)
@click.option(
    "--instance-id", help="Stable identity of this worker (also Kafka static membership)."
)
@click.option(
    "--capacity",
    type=click.IntRange(1, None),
    help="Weight of this worker's share of tasks (default 1).",
)
def worker_command(
    app_spec: str,
    broker: str | None,
    datadir: Path | None,
    web_port: int | None,
    web_host: str | None,
    web_bind: str | None,
    web: bool | None,
    standby_replicas: int | None,
    loglevel: str,
    logfile: str | None,
    debug: bool,
    blocking_timeout: float | None,
    broker_timeout: float,
    rack: str | None,
    host_label: str | None,
    instance_id: str | None,
    capacity: int | None,
) -> None:
    """Run a worker for the app given with -A until Ctrl-C.

    Exits with a one-line error (status 1) when the app cannot be imported,
    no broker answers, or the topics of a join have different partition counts.
    """
    from streamjoin.join.errors import JoinError
    from streamjoin.runtime.errors import RuntimeComponentError
    from streamjoin.runtime.worker import WorkerOptions, run_worker

    options = WorkerOptions(
        app=app_spec,
        broker=broker,
        datadir=datadir,
        web_port=web_port,
        web_host=web_host,
        web_bind=web_bind,
        web=web,
        standby_replicas=standby_replicas,
        loglevel=loglevel,
        logfile=logfile,
        debug=debug,
        blocking_timeout=blocking_timeout,
        broker_timeout=broker_timeout,
        rack=rack,
        host_label=host_label,
        instance_id=instance_id,
        capacity=capacity,
    )
    try:
        code = run_worker(options)
    except (RuntimeComponentError, JoinError) as exc:
        raise click.ClickException(str(exc)) from None
    raise SystemExit(code)
