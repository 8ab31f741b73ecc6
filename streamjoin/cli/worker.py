"""``streamjoin worker``: run an app's agents and tables in this process.

Every option is also read from the environment variable ``STREAMJOIN_<OPTION>``
(``--web-bind`` from ``STREAMJOIN_WEB_BIND``, ``-A/--app`` from
``STREAMJOIN_APP``); a flag given on the command line wins. The SASL password
and the TLS key's password come from the environment only.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from streamjoin.worker.options import (
    DEFAULT_WEB_BIND,
    SASL_MECHANISMS,
    SASL_PASSWORD_ENV,
    SECURITY_PROTOCOLS,
    SSL_KEY_PASSWORD_ENV,
)

__all__ = ["worker_command"]

_FILE = click.Path(dir_okay=False, path_type=Path)


@click.command(
    "worker",
    epilog=f"Secrets come from the environment only: {SASL_PASSWORD_ENV} (SASL password) "
    f"and {SSL_KEY_PASSWORD_ENV} (password of an encrypted --ssl-keyfile).",
)
@click.option(
    "-A",
    "--app",
    "app_spec",
    required=True,
    metavar="MODULE:APP",
    envvar="STREAMJOIN_APP",
    show_envvar=True,
    help="The app to run, e.g. myproj.app:app.",
)
@click.option(
    "-b",
    "--broker",
    metavar="URL",
    envvar="STREAMJOIN_BROKER",
    show_envvar=True,
    help="Broker URL(s), e.g. kafka://127.0.0.1:9092, several separated by ';' "
    "(default: the app's).",
)
@click.option(
    "--datadir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="STREAMJOIN_DATADIR",
    show_envvar=True,
    help="Data directory; RocksDB state lives below it (default: the app's).",
)
@click.option(
    "--web-port",
    type=click.IntRange(1, 65535),
    envvar="STREAMJOIN_WEB_PORT",
    show_envvar=True,
    help="Port of this worker's web server (default: the app's, or a free port "
    "instead of faust's 6066).",
)
@click.option(
    "--web-host",
    envvar="STREAMJOIN_WEB_HOST",
    show_envvar=True,
    help="Host name this worker advertises to the others (default: faust's, the host name).",
)
@click.option(
    "--web-bind",
    default=DEFAULT_WEB_BIND,
    show_default=True,
    envvar="STREAMJOIN_WEB_BIND",
    show_envvar=True,
    help="Interface the web server binds; 0.0.0.0 for every interface.",
)
@click.option(
    "--with-web/--without-web",
    "web",
    default=None,
    envvar="STREAMJOIN_WEB",
    show_envvar=True,
    help="Force the web server on or off (default: the app's setting).",
)
@click.option(
    "--standby-replicas",
    type=click.IntRange(0, None),
    envvar="STREAMJOIN_STANDBY_REPLICAS",
    show_envvar=True,
    help="Standby replicas per table partition (faust's table_standby_replicas).",
)
@click.option(
    "--replication-factor",
    type=click.IntRange(1, None),
    envvar="STREAMJOIN_REPLICATION_FACTOR",
    show_envvar=True,
    help="Replication factor of the topics the worker creates: changelogs, repartition "
    "topics (faust's topic_replication_factor; default: the app's, faust's is 1).",
)
@click.option(
    "-l",
    "--loglevel",
    default="info",
    show_default=True,
    type=click.Choice(["crit", "error", "warn", "warning", "info", "debug"], case_sensitive=False),
    envvar="STREAMJOIN_LOGLEVEL",
    show_envvar=True,
    help="Log level.",
)
@click.option(
    "-f",
    "--logfile",
    envvar="STREAMJOIN_LOGFILE",
    show_envvar=True,
    help="Log to this file instead of stderr.",
)
@click.option(
    "--debug/--no-debug",
    default=False,
    envvar="STREAMJOIN_DEBUG",
    show_envvar=True,
    help="faust debug mode.",
)
@click.option(
    "--blocking-timeout",
    type=float,
    envvar="STREAMJOIN_BLOCKING_TIMEOUT",
    show_envvar=True,
    help="Seconds before a blocked event loop is reported (debug).",
)
@click.option(
    "--broker-timeout",
    type=float,
    default=10.0,
    show_default=True,
    envvar="STREAMJOIN_BROKER_TIMEOUT",
    show_envvar=True,
    help="Seconds to wait for the broker before giving up.",
)
@click.option(
    "--rack",
    envvar="STREAMJOIN_RACK",
    show_envvar=True,
    help=(
        "Rack or zone of this worker: standbys prefer other racks, actives their "
        "partitions' replica racks, and fetches go to a replica on this rack where "
        "the brokers allow it (client_rack)."
    ),
)
@click.option(
    "--host-label",
    envvar="STREAMJOIN_HOST_LABEL",
    show_envvar=True,
    help="Host this worker runs on; no standby shares its active's host label.",
)
@click.option(
    "--instance-id",
    envvar="STREAMJOIN_INSTANCE_ID",
    show_envvar=True,
    help="Stable identity of this worker (also Kafka static membership).",
)
@click.option(
    "--capacity",
    type=click.IntRange(1, None),
    envvar="STREAMJOIN_CAPACITY",
    show_envvar=True,
    help="Weight of this worker's share of tasks (default 1).",
)
@click.option(
    "--recovery-lag",
    type=click.IntRange(0, None),
    envvar="STREAMJOIN_RECOVERY_LAG",
    show_envvar=True,
    help="Largest changelog lag (records) at which a standby counts as warm (default 10000).",
)
@click.option(
    "--max-warmup-replicas",
    type=click.IntRange(0, None),
    envvar="STREAMJOIN_MAX_WARMUP_REPLICAS",
    show_envvar=True,
    help=(
        "Warm-up replicas the whole group may restore at once when this worker leads "
        "(default: no cap; 0: move tasks at once, cold if need be)."
    ),
)
@click.option(
    "--rack-traffic-cost",
    type=click.IntRange(0, None),
    envvar="STREAMJOIN_RACK_TRAFFIC_COST",
    show_envvar=True,
    help=(
        "When this worker leads: what one partition read across racks costs against "
        "--rack-move-cost (default 10; 0: actives ignore replica racks)."
    ),
)
@click.option(
    "--rack-move-cost",
    type=click.IntRange(0, None),
    envvar="STREAMJOIN_RACK_MOVE_COST",
    show_envvar=True,
    help=(
        "When this worker leads: what moving a task beyond what balance needs costs "
        "against --rack-traffic-cost (default 1)."
    ),
)
@click.option(
    "--standby-share",
    type=click.FloatRange(0, 1, min_open=True),
    envvar="STREAMJOIN_STANDBY_SHARE",
    show_envvar=True,
    help=(
        "Share of the worker's time that catching up standbys and warm-ups may take; "
        "it rests in between, leaving the rest to live tasks (default 0.5; 1: no rest)."
    ),
)
@click.option(
    "--security-protocol",
    type=click.Choice(SECURITY_PROTOCOLS, case_sensitive=False),
    metavar=f"[{'|'.join(SECURITY_PROTOCOLS)}]",
    envvar="STREAMJOIN_SECURITY_PROTOCOL",
    show_envvar=True,
    help="Kafka security protocol (default: the app's broker_credentials, else PLAINTEXT).",
)
@click.option(
    "--sasl-mechanism",
    type=click.Choice(SASL_MECHANISMS, case_sensitive=False),
    metavar=f"[{'|'.join(SASL_MECHANISMS)}]",
    envvar="STREAMJOIN_SASL_MECHANISM",
    show_envvar=True,
    help="SASL mechanism (default PLAIN).",
)
@click.option(
    "--sasl-username",
    envvar="STREAMJOIN_SASL_USERNAME",
    show_envvar=True,
    help=f"SASL user name (PLAIN, SCRAM); the password is read from {SASL_PASSWORD_ENV}.",
)
@click.option(
    "--ssl-cafile",
    type=_FILE,
    envvar="STREAMJOIN_SSL_CAFILE",
    show_envvar=True,
    help="CA bundle (PEM) that verifies the brokers (default: the system's).",
)
@click.option(
    "--ssl-certfile",
    type=_FILE,
    envvar="STREAMJOIN_SSL_CERTFILE",
    show_envvar=True,
    help="Client certificate (PEM) for mutual TLS.",
)
@click.option(
    "--ssl-keyfile",
    type=_FILE,
    envvar="STREAMJOIN_SSL_KEYFILE",
    show_envvar=True,
    help="Key (PEM) of --ssl-certfile, unless the certificate file holds it.",
)
@click.option(
    "--kerberos-service-name",
    envvar="STREAMJOIN_KERBEROS_SERVICE_NAME",
    show_envvar=True,
    help="Kerberos service name of the brokers (GSSAPI; default kafka).",
)
@click.option(
    "--kerberos-domain-name",
    envvar="STREAMJOIN_KERBEROS_DOMAIN_NAME",
    show_envvar=True,
    help="Kerberos domain of the brokers (GSSAPI).",
)
# long because: click passes every option above as a parameter, and each goes on by
# name to KafkaSecurity or WorkerOptions
def worker_command(
    app_spec: str,
    broker: str | None,
    datadir: Path | None,
    web_port: int | None,
    web_host: str | None,
    web_bind: str,
    web: bool | None,
    standby_replicas: int | None,
    replication_factor: int | None,
    loglevel: str,
    logfile: str | None,
    debug: bool,
    blocking_timeout: float | None,
    broker_timeout: float,
    rack: str | None,
    host_label: str | None,
    instance_id: str | None,
    capacity: int | None,
    recovery_lag: int | None,
    max_warmup_replicas: int | None,
    rack_traffic_cost: int | None,
    rack_move_cost: int | None,
    standby_share: float | None,
    security_protocol: str | None,
    sasl_mechanism: str | None,
    sasl_username: str | None,
    ssl_cafile: Path | None,
    ssl_certfile: Path | None,
    ssl_keyfile: Path | None,
    kerberos_service_name: str | None,
    kerberos_domain_name: str | None,
) -> None:
    """Run a worker for the app given with -A until Ctrl-C.

    Exits with a one-line error (status 1) when the settings contradict each
    other, the app cannot be imported, no broker answers, or the topics of a
    join have different partition counts.
    """
    from streamjoin.errors import StreamjoinError
    from streamjoin.worker.options import KafkaSecurity
    from streamjoin.worker.run import WorkerOptions, run_worker

    security = KafkaSecurity(
        protocol=security_protocol.upper() if security_protocol else None,
        sasl_mechanism=sasl_mechanism.upper() if sasl_mechanism else None,
        sasl_username=sasl_username,
        sasl_password=os.environ.get(SASL_PASSWORD_ENV) or None,
        ssl_cafile=ssl_cafile,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        ssl_key_password=os.environ.get(SSL_KEY_PASSWORD_ENV) or None,
        kerberos_service_name=kerberos_service_name,
        kerberos_domain_name=kerberos_domain_name,
    )
    options = WorkerOptions(
        app=app_spec,
        broker=broker,
        datadir=datadir,
        web_port=web_port,
        web_host=web_host,
        web_bind=web_bind,
        web=web,
        standby_replicas=standby_replicas,
        replication_factor=replication_factor,
        loglevel=loglevel,
        logfile=logfile,
        debug=debug,
        blocking_timeout=blocking_timeout,
        broker_timeout=broker_timeout,
        rack=rack,
        host_label=host_label,
        instance_id=instance_id,
        capacity=capacity,
        recovery_lag=recovery_lag,
        max_warmup_replicas=max_warmup_replicas,
        rack_traffic_cost=rack_traffic_cost,
        rack_move_cost=rack_move_cost,
        standby_share=standby_share,
        security=security,
    )
    try:
        code = run_worker(options)
    except StreamjoinError as exc:
        raise click.ClickException(str(exc)) from None
    raise SystemExit(code)
