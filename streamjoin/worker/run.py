"""Run a faust/streamjoin app as a worker: load it, apply overrides, check the broker.

Used by ``streamjoin worker``; importable so that tests and embedding code can
run a worker without going through the command line.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamjoin.dev.broker import free_port
from streamjoin.membership.settings import MemberSettings
from streamjoin.restore.throttle import checked_share
from streamjoin.worker.errors import AppImportError, BrokerUnreachable, WorkerSettingsError
from streamjoin.worker.load import load_object
from streamjoin.worker.options import DEFAULT_WEB_BIND, KafkaSecurity, broker_urls

if TYPE_CHECKING:
    from streamjoin.faust.restore.fetch import RestoreSettings

#: faust's default web port, which every worker on a machine would share
FAUST_WEB_PORT = 6066

__all__ = [
    "WorkerOptions",
    "check_broker",
    "configure_app",
    "load_app",
    "run_worker",
]


@dataclass(frozen=True)
class WorkerOptions:
    """Options of one worker process.

    Attributes:
        app: ``module:attribute`` naming a ``faust.App`` (or ``module`` with an ``app``).
        broker: broker URL(s), e.g. ``kafka://127.0.0.1:9092``; overrides the app's.
        datadir: data directory (RocksDB state lives below it); overrides the app's.
        web_port: port of the worker's web server; ``None``: the app's setting
            if it has one, else a free port (not faust's 6066), because faust
            binds one even when the web server is disabled.
        web_host: host name the worker advertises.
        web_bind: interface the web server binds: loopback unless told
            otherwise, whatever the app's (faust's default is every interface).
        web: ``True``/``False`` to force the web server on/off; ``None`` keeps the app's.
        standby_replicas: faust's ``table_standby_replicas``; overrides the app's.
        replication_factor: faust's ``topic_replication_factor`` (the topics
            the worker creates: changelogs, repartition topics); overrides the app's.
        loglevel: faust/mode log level (``info``, ``warning``, ...).
        logfile: log to this file instead of stderr.
        debug: faust debug mode.
        blocking_timeout: seconds before a blocked event loop is reported.
        broker_timeout: seconds to wait for the broker to answer before giving up.
        rack: rack / zone of this worker; standbys prefer other racks, actives
            their partitions' replica racks; the consumer fetches as this rack.
        host_label: no standby goes on a worker with the same label as its active.
        instance_id: stable identity (also Kafka static membership).
        capacity: integer weight of this worker's share of tasks.
        recovery_lag: largest changelog lag (records) at which a member counts
            as warm (the assignor's ``acceptable_recovery_lag``).
        max_warmup_replicas: warm-ups the group may hold at once when this
            worker leads (``None``: no cap; 0: no warm-ups).
        rack_traffic_cost: what a partition read across racks costs when this
            worker leads (``None``: the assignor's default, 10; 0: actives
            ignore replica racks).
        rack_move_cost: what a task moved beyond balance's needs costs against
            that traffic when this worker leads (``None``: the default, 1).
        standby_share: share of the time the standby follower may take while
            catching up, in (0, 1] (``None``: the app's ``RestoreSettings``);
            it reaches the restorer in the app's restore settings
            (:func:`configure_app`).
        security: how to authenticate to Kafka; the default keeps the app's
            ``broker_credentials``.
    """

    app: str
    broker: str | None = None
    datadir: Path | None = None
    web_port: int | None = None
    web_host: str | None = None
    web_bind: str = DEFAULT_WEB_BIND
    web: bool | None = None
    standby_replicas: int | None = None
    replication_factor: int | None = None
    loglevel: str = "info"
    logfile: str | None = None
    debug: bool = False
    blocking_timeout: float | None = None
    broker_timeout: float = 10.0
    rack: str | None = None
    host_label: str | None = None
    instance_id: str | None = None
    capacity: int | None = None
    recovery_lag: int | None = None
    max_warmup_replicas: int | None = None
    rack_traffic_cost: int | None = None
    rack_move_cost: int | None = None
    standby_share: float | None = None
    security: KafkaSecurity = field(default_factory=KafkaSecurity)


def load_app(spec: str) -> Any:
    """Import ``module:attribute`` (``module`` alone: its ``app``) and return the faust app.

    Raises:
        AppImportError: the module cannot be imported, the attribute is
            missing, or it is not a ``faust.App``.
    """
    from streamjoin.faust.runner import APP_TYPES

    return load_object(
        spec,
        expected=APP_TYPES,
        error=AppImportError,
        what="app",
        example="-A myproj.app:app",
        default_attr="app",
    )


def _host_port(url: Any) -> tuple[str, int]:
    host = getattr(url, "host", None) or "127.0.0.1"
    port = getattr(url, "port", None) or 9092
    return str(host), int(port)


def check_broker(urls: list[Any], timeout: float) -> None:
    """Return when one of *urls* accepts TCP connections within *timeout* seconds.

    Raises:
        BrokerUnreachable: none answered.
    """
    addresses = [_host_port(u) for u in urls]
    deadline = time.monotonic() + timeout
    while True:
        for host, port in addresses:
            with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1.0):
                return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    shown = ", ".join(f"{h}:{p}" for h, p in addresses)
    raise BrokerUnreachable(
        f"no Kafka broker answers at {shown} (waited {timeout:.0f}s); "
        "start one with `streamjoin broker` or pass --broker kafka://HOST:PORT"
    )


def _override(conf: Any, name: str, value: Any) -> None:
    """Set ``conf.<name>`` only when it differs (a late change makes faust warn).

    The current value is read as faust stores it, which faust does not count
    as a use of the setting.
    """
    from streamjoin.faust.kafka.settings import stored_setting

    if stored_setting(conf, name) != value:
        setattr(conf, name, value)


#: faust setting -> the environment variable faust reads it from when an app is built
FAUST_ENV = {
    "broker": "BROKER_URL",
    "datadir": "APP_DATADIR",
    "table_standby_replicas": "TABLE_STANDBY_REPLICAS",
    "topic_replication_factor": "TOPIC_REPLICATION_FACTOR",
    "web_port": "WEB_PORT",
    "web_host": "WEB_HOST",
    "web_bind": "WEB_BIND",
    "consumer_group_instance_id": "CONSUMER_GROUP_INSTANCE_ID",
}


def faust_settings(options: WorkerOptions) -> dict[str, Any]:
    """The faust settings *options* set (name -> value): their one definition.

    :func:`run_worker` exports those faust reads from the environment
    (:data:`FAUST_ENV`) before it imports the app, because an app may use a
    setting while it is built (its broker, its data directory);
    :func:`configure_app` then applies all of them to ``app.conf``.
    """
    settings: dict[str, Any] = {"web_bind": options.web_bind}
    if options.broker is not None:
        settings["broker"] = broker_urls(options.broker)
    if options.datadir is not None:
        settings["datadir"] = _usable_datadir(Path(options.datadir))
    if options.standby_replicas is not None:
        settings["table_standby_replicas"] = options.standby_replicas
    if options.replication_factor is not None:
        settings["topic_replication_factor"] = options.replication_factor
    if options.security.protocol is not None:
        # explicit settings replace the app's credentials (PLAINTEXT: none at all)
        settings["broker_credentials"] = options.security.credentials()
        if options.security.protocol.upper() == "PLAINTEXT":
            settings["ssl_context"] = None
    if options.web_port is not None:
        settings["web_port"] = options.web_port
    if options.web_host is not None:
        settings["web_host"] = options.web_host
    if options.web is not None:
        settings["web_enabled"] = options.web
    if options.instance_id is not None:
        # Kafka static membership, and the member's stable identity
        settings["consumer_group_instance_id"] = options.instance_id
    return settings


def _usable_datadir(path: Path) -> Path:
    """*path*, when it is a directory or can become one (its parent exists).

    Raises:
        WorkerSettingsError: it is a file, or its parent directory is missing.
    """
    if path.exists() and not path.is_dir():
        raise WorkerSettingsError(f"--datadir {path} is a file; give a directory")
    if not path.exists() and not path.absolute().parent.is_dir():
        raise WorkerSettingsError(
            f"--datadir {path}: its parent directory {path.absolute().parent} does not exist; "
            "create it first or choose another data directory"
        )
    return path


def _export_environment(settings: dict[str, Any]) -> None:
    """Put *settings* where faust reads them when the app is imported and built."""
    for name, variable in FAUST_ENV.items():
        if name in settings:
            value = settings[name]
            os.environ[variable] = ";".join(map(str, value)) if name == "broker" else str(value)


def configure_app(app: Any, options: WorkerOptions, settings: dict[str, Any] | None = None) -> None:
    """Apply *options* (as :func:`faust_settings` gives them) to ``app.conf``.

    Explicit options beat the app's own settings. An app that sets no web
    port gets a free one instead of faust's 6066 (faust binds it even with
    the web server off), so workers on one machine never collide. The member
    settings (``conf.streamjoin_member``) and, with a standby share, the restore
    settings (``conf.streamjoin_restore``) travel on ``app.conf`` too.

    Raises:
        ConfigurationError: the standby share is not a number in (0, 1].
    """
    from yarl import URL

    from streamjoin.faust.kafka.settings import stored_setting

    conf = app.conf
    settings = faust_settings(options) if settings is None else settings
    for name, value in settings.items():
        if name == "broker":
            if list(stored_setting(conf, "broker") or ()) != value:
                conf.broker = value
        else:
            _override(conf, name, value)
    if "web_port" not in settings and stored_setting(conf, "web_port") == FAUST_WEB_PORT:
        _override(conf, "web_port", free_port())
    _override(conf, "canonical_url", URL(f"http://{conf.web_host}:{conf.web_port}"))
    conf.streamjoin_member = MemberSettings.from_env(os.environ).overridden(
        instance_id=options.instance_id,
        host_label=options.host_label,
        rack=options.rack,
        capacity=options.capacity,
        recovery_lag=options.recovery_lag,
        max_warmup_replicas=options.max_warmup_replicas,
        rack_traffic_cost=options.rack_traffic_cost,
        rack_move_cost=options.rack_move_cost,
    )
    if options.standby_share is not None:
        conf.streamjoin_restore = _restore_settings(options.standby_share)


def _restore_settings(standby_share: float) -> type[RestoreSettings]:
    """The app's restore settings with *standby_share*: a subclass of ``Restorer.settings``
    (:class:`~streamjoin.faust.restore.fetch.RestoreSettings`, or what the app set there)
    that changes the share only. :func:`configure_app` puts it on the app's
    configuration as ``conf.streamjoin_restore``, which the restorer reads instead of
    ``Restorer.settings``.

    Raises:
        ConfigurationError: the share is not a number in (0, 1].
    """
    from streamjoin.faust.restore.restorer import Restorer

    share = checked_share(standby_share)
    base = Restorer.settings
    return type(f"{base.__name__}WithShare", (base,), {"standby_share": share})


def run_worker(options: WorkerOptions) -> int:
    """Load, configure and run the app until it stops; return the exit status.

    Raises:
        WorkerSettingsError: contradicting settings, unusable TLS files.
        ConfigurationError: a standby share outside (0, 1].
        AppImportError: the app cannot be loaded.
        BrokerUnreachable: the broker does not answer.
        TopicMismatchError: topics read together (a join's) have different partition counts.
    """
    settings = faust_settings(options)  # contradictions and unusable TLS files fail first
    settings.setdefault("web_port", free_port())
    _export_environment(settings)
    app = load_app(options.app)
    configure_app(app, options, settings)
    check_broker(list(app.conf.broker), options.broker_timeout)
    from streamjoin.faust.kafka.checks import check_topics

    check_topics(app, options.broker_timeout)
    from streamjoin.faust.runner import run_app

    return run_app(
        app,
        loglevel=options.loglevel,
        logfile=options.logfile,
        debug=options.debug,
        blocking_timeout=options.blocking_timeout,
    )
