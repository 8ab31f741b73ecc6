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
from typing import Any

from streamjoin.dev.broker import free_port
from streamjoin.membership.settings import MemberSettings
from streamjoin.worker.errors import AppImportError, BrokerUnreachable
from streamjoin.worker.load import load_object
from streamjoin.worker.options import DEFAULT_WEB_BIND, KafkaSecurity, broker_urls

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
        rack: rack / zone of this worker; standbys prefer other racks.
        host_label: no standby goes on a worker with the same label as its active.
        instance_id: stable identity (also Kafka static membership).
        capacity: integer weight of this worker's share of tasks.
        recovery_lag: largest changelog lag (records) at which a member counts
            as warm (the assignor's ``acceptable_recovery_lag``).
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
    security: KafkaSecurity = field(default_factory=KafkaSecurity)


def load_app(spec: str) -> Any:
    """Import ``module:attribute`` (``module`` alone: its ``app``) and return the faust app.

    Raises:
        AppImportError: the module cannot be imported, the attribute is
            missing, or it is not a ``faust.App``.
    """
    import faust

    return load_object(
        spec,
        expected=faust.App,
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

    The current value is read from faust's storage attribute (``_<name>``),
    which faust does not count as a use of the setting.
    """
    try:
        current = object.__getattribute__(conf, f"_{name}")
    except AttributeError:
        current = getattr(conf, name)
    if current != value:
        setattr(conf, name, value)


def configure_app(app: Any, options: WorkerOptions) -> None:
    """Apply *options* to ``app.conf`` (explicit options beat the app's own settings)."""
    from yarl import URL

    conf = app.conf
    if options.broker is not None:
        wanted = broker_urls(options.broker)
        if list(object.__getattribute__(conf, "_broker") or ()) != wanted:
            conf.broker = wanted
    if options.datadir is not None:
        _override(conf, "datadir", Path(options.datadir))
    if options.standby_replicas is not None:
        _override(conf, "table_standby_replicas", options.standby_replicas)
    if options.replication_factor is not None:
        _override(conf, "topic_replication_factor", options.replication_factor)
    if options.security.protocol is not None:
        # explicit settings replace the app's credentials (PLAINTEXT: none at all)
        _override(conf, "broker_credentials", options.security.credentials())
        if options.security.protocol.upper() == "PLAINTEXT":
            _override(conf, "ssl_context", None)
    if options.web_port is not None:
        _override(conf, "web_port", options.web_port)
    elif object.__getattribute__(conf, "_web_port") == FAUST_WEB_PORT:
        # faust binds its web port even with the web server off: an app that
        # sets none gets a free one instead of faust's 6066
        _override(conf, "web_port", free_port())
    if options.web_host is not None:
        _override(conf, "web_host", options.web_host)
    _override(conf, "web_bind", options.web_bind)
    if options.web is not None:
        _override(conf, "web_enabled", options.web)
    _override(conf, "canonical_url", URL(f"http://{conf.web_host}:{conf.web_port}"))
    if options.instance_id is not None:
        # Kafka static membership, and the member's stable identity
        _override(conf, "consumer_group_instance_id", options.instance_id)
    conf.streamjoin_member = MemberSettings.from_env(os.environ).overridden(
        instance_id=options.instance_id,
        host_label=options.host_label,
        rack=options.rack,
        capacity=options.capacity,
        recovery_lag=options.recovery_lag,
    )


def run_worker(options: WorkerOptions) -> int:
    """Load, configure and run the app until it stops; return the exit status.

    Raises:
        WorkerSettingsError: contradicting settings, unusable TLS files.
        AppImportError: the app cannot be loaded.
        BrokerUnreachable: the broker does not answer.
        TopicMismatchError: topics read together (a join's) have different partition counts.
    """
    options.security.credentials()  # contradictions and unusable TLS files fail first
    app = load_app(options.app)
    configure_app(app, options)
    check_broker(list(app.conf.broker), options.broker_timeout)
    from streamjoin.faust.checks import check_topics

    check_topics(app, options.broker_timeout)
    from faust.worker import Worker

    kwargs: dict[str, Any] = {
        "loglevel": options.loglevel,
        "logfile": options.logfile,
        "debug": options.debug,
    }
    if options.blocking_timeout is not None:
        kwargs["blocking_timeout"] = options.blocking_timeout
    worker = Worker(app, **kwargs)
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
