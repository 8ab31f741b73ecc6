"""Run a faust/streamjoin app as a worker: load it, apply overrides, check the broker.

Used by ``streamjoin worker``; importable so that tests and embedding code can
run a worker without going through the command line.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamjoin.runtime.broker import free_port
from streamjoin.runtime.errors import AppImportError, BrokerUnreachable

__all__ = ["WorkerOptions", "check_broker", "configure_app", "load_app", "run_worker"]


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
        web_bind: interface the web server binds.
        web: ``True``/``False`` to force the web server on/off; ``None`` keeps the app's.
        standby_replicas: faust's ``table_standby_replicas``; overrides the app's.
        loglevel: faust/mode log level (``info``, ``warning``, ...).
        logfile: log to this file instead of stderr.
        debug: faust debug mode.
        blocking_timeout: seconds before a blocked event loop is reported.
        broker_timeout: seconds to wait for the broker to answer before giving up.
        rack: rack / zone of this worker; standbys prefer other racks.
        host_label: no standby goes on a worker with the same label as its active.
        instance_id: stable identity (also Kafka static membership).
        capacity: integer weight of this worker's share of tasks.
    """

    app: str
    broker: str | None = None
    datadir: Path | None = None
    web_port: int | None = None
    web_host: str | None = None
    web_bind: str | None = None
    web: bool | None = None
    standby_replicas: int | None = None
    loglevel: str = "info"
    logfile: str | None = None
    debug: bool = False
    blocking_timeout: float | None = None
    broker_timeout: float = 10.0
    rack: str | None = None
    host_label: str | None = None
    instance_id: str | None = None
    capacity: int | None = None


def load_app(spec: str) -> Any:
    """Import ``module:attribute`` and return the faust app it names.

    Raises:
        AppImportError: the module cannot be imported, the attribute is
            missing, or it is not a ``faust.App``.
    """
    import faust

    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise AppImportError(
            f"-A {spec!r}: give the app as module:attribute, e.g. -A myproj.app:app"
        )
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise AppImportError(
            f"cannot import app module {module_name!r}: {exc}; "
            "check -A and that the module is on PYTHONPATH (or in the current directory)"
        ) from exc
    except Exception as exc:
        raise AppImportError(
            f"importing app module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    name = attr or "app"
    try:
        app = getattr(module, name)
    except AttributeError as exc:
        raise AppImportError(
            f"module {module_name!r} has no attribute {name!r}; "
            f"give -A {module_name}:<app variable>"
        ) from exc
    if not isinstance(app, faust.App):
        raise AppImportError(
            f"{module_name}:{name} is a {type(app).__name__}, not a faust.App/streamjoin.App"
        )
    return app


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


def _export_environment(options: WorkerOptions) -> None:
    """Pass options as faust's environment variables, before the app is imported.

    Settings the app passes explicitly win over these; :func:`configure_app`
    then overrides them where the command line asked for something else.
    """
    if options.datadir is not None:
        os.environ["APP_DATADIR"] = str(options.datadir)
    if options.broker is not None:
        os.environ["BROKER_URL"] = options.broker
    if options.standby_replicas is not None:
        os.environ["TABLE_STANDBY_REPLICAS"] = str(options.standby_replicas)
    # faust binds its web port even with the web server off: without
    # --web-port each worker gets a free one instead of faust's 6066.
    web_port = options.web_port if options.web_port is not None else free_port()
    os.environ["WEB_PORT"] = str(web_port)
    # read by streamjoin's assignor (see streamjoin.adapter.partition_assignor)
    assignor_env = {
        "STREAMJOIN_RACK": options.rack,
        "STREAMJOIN_HOST_LABEL": options.host_label,
        "STREAMJOIN_INSTANCE_ID": options.instance_id,
        "STREAMJOIN_CAPACITY": None if options.capacity is None else str(options.capacity),
        "CONSUMER_GROUP_INSTANCE_ID": options.instance_id,
    }
    for name, value in assignor_env.items():
        if value is not None:
            os.environ[name] = value


def _override(conf: Any, name: str, value: Any) -> None:
    """Set ``conf.<name>`` only when it differs (a late change makes faust warn)."""
    if getattr(conf, name) != value:
        setattr(conf, name, value)


def configure_app(app: Any, options: WorkerOptions) -> None:
    """Apply *options* to ``app.conf`` (explicit options beat the app's own settings)."""
    from yarl import URL

    conf = app.conf
    if options.broker is not None:
        wanted = [URL(u.strip()) for u in options.broker.split(";") if u.strip()]
        if list(conf.broker) != wanted:
            conf.broker = options.broker
    if options.datadir is not None:
        _override(conf, "datadir", Path(options.datadir))
    if options.standby_replicas is not None:
        _override(conf, "table_standby_replicas", options.standby_replicas)
    if options.web_port is not None:
        _override(conf, "web_port", options.web_port)
    if options.web_host is not None:
        _override(conf, "web_host", options.web_host)
    if options.web_bind is not None:
        _override(conf, "web_bind", options.web_bind)
    if options.web is not None:
        _override(conf, "web_enabled", options.web)
    _override(conf, "canonical_url", URL(f"http://{conf.web_host}:{conf.web_port}"))


def run_worker(options: WorkerOptions) -> int:
    """Load, configure and run the app until it stops; return the exit status.

    Raises:
        AppImportError: the app cannot be loaded.
        BrokerUnreachable: the broker does not answer.
        JoinCopartitionError: the topics of a join have different partition counts.
    """
    _export_environment(options)
    app = load_app(options.app)
    configure_app(app, options)
    check_broker(list(app.conf.broker), options.broker_timeout)
    from streamjoin.adapter.join.preflight import check_join_partitions

    host, port = _host_port(app.conf.broker[0])
    check_join_partitions(app, f"{host}:{port}", options.broker_timeout)
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
