"""Processes the benchmarks start: the embedded broker and workers, each always stopped.

Workers run as ``streamjoin worker`` child processes (:class:`WorkerProcess`: own
process group, own log file) with their data under ``<workdir>/data-<name>`` and their
log in ``<workdir>/<name>.log``.  :func:`running` stops a worker however the block
ends; :func:`exit_on_sigterm` makes SIGTERM unwind like Ctrl-C so those blocks (and
the broker's) run.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from benchmarks.harness.measure import Sample, Throughput
from benchmarks.harness.report import Progress, say
from streamjoin.dev.broker import LOOPBACK, BrokerOptions, EmbeddedBroker
from streamjoin.dev.process import WorkerProcess

#: the benchmarks' directory: the benchmarks' own apps (``join_peer_app``,
#: ``restore_app``) are imported from here
BENCHMARKS = Path(__file__).resolve().parents[1]
#: the repository root
ROOT = BENCHMARKS.parent

POLL_INTERVAL_S = 0.1
STOP_TIMEOUT_S = 10.0


class BenchError(Exception):
    """A run that cannot give a figure (a worker died, a wait timed out)."""


def exit_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so the workers and the broker are stopped."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def embedded_broker() -> EmbeddedBroker:
    """A fresh embedded broker on a free port (use it as a context manager)."""
    return EmbeddedBroker(BrokerOptions(port=0))


def web_args(port: int) -> list[str]:
    """Worker options: web server on *port*, bound to and advertised on loopback."""
    return ["--with-web", "--web-port", str(port), "--web-bind", LOOPBACK, "--web-host", LOOPBACK]


def worker(
    app: str,
    broker: EmbeddedBroker,
    workdir: Path,
    name: str,
    *,
    env: Mapping[str, str],
    web_port: int | None = None,
    cwd: Path = BENCHMARKS,
) -> WorkerProcess:
    """One worker of *app* (not started), named *name* in *workdir*.

    *cwd* is its working directory and on its path (default: the benchmarks'
    directory, where the benchmarks' own apps live); with *web_port*, its web
    server listens there on loopback.
    """
    return WorkerProcess(
        app,
        broker.url,
        workdir / f"data-{name}",
        workdir / f"{name}.log",
        env=env,
        extra_args=web_args(web_port) if web_port is not None else (),
        cwd=cwd,
    )


@contextlib.contextmanager
def running(process: WorkerProcess, stop_timeout: float = STOP_TIMEOUT_S) -> Iterator[None]:
    """Start *process*; stop it (SIGTERM, SIGKILL after *stop_timeout*) when the block ends."""
    process.start()
    try:
        yield
    finally:
        process.stop(timeout=stop_timeout)


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, no proxy


def http_json(url: str, timeout: float = 2.0) -> Any | None:
    """GET *url* and decode its JSON; ``None`` when the worker does not answer (yet)."""
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def watch(
    name: str,
    process: WorkerProcess,
    count: Callable[[], int | None],
    expected: int,
    timeout: float,
) -> Throughput:
    """Poll *count* until it reaches *expected*; time the pass from its first record.

    Raises:
        BenchError: the worker exited, or *timeout* seconds passed first.
    """
    started = time.monotonic()
    deadline = started + timeout
    progress = Progress(started)
    first: Sample | None = None
    while True:
        if not process.running():
            raise BenchError(
                f"{name} worker exited (status {process.returncode()}) before processing "
                f"{expected:,} records; its log: {process.log_path}"
            )
        before = time.monotonic()
        seen = count()
        after = time.monotonic()
        at = (before + after) / 2  # the worker answered somewhere in between
        if seen is not None and seen > 0:
            if first is None:
                first = Sample(at, seen)
                say(f"  {name}: first records processed {at - started:.1f}s after start")
            if seen >= expected:
                return Throughput(name, expected, first, Sample(at, seen), first.at - started)
        if progress.due(after):
            if first is None:
                say(f"  {name}: starting ({after - started:.0f}s)")
            else:
                done = (seen or first.count) - first.count
                rate = done / max(after - first.at, 1e-9)
                say(f"  {name}: {seen or 0:,}/{expected:,} records ({rate:,.0f}/s)")
        if after >= deadline:
            raise BenchError(
                f"{name}: {seen or 0:,} of {expected:,} records processed after "
                f"{timeout:.0f}s; its log: {process.log_path}"
            )
        time.sleep(POLL_INTERVAL_S)
