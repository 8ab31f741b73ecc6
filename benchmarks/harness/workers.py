"""Processes the benchmarks start: the embedded broker and workers, each always stopped.

Workers run as ``streamjoin worker`` child processes (:class:`WorkerProcess`: own
process group, own log file) with their data under ``<workdir>/data-<name>`` and their
log in ``<workdir>/<name>.log``, in a directory :func:`run_directory` makes and keeps
when the run fails.  :func:`running` stops a worker however the block ends, and
:class:`Workers` a group of them; :func:`exit_on_sigterm` makes SIGTERM unwind like
Ctrl-C so those blocks (and the broker's) run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from benchmarks.harness.measure import Sample, Throughput, process_rss_bytes
from benchmarks.harness.report import Progress, say
from streamjoin.dev.broker import LOOPBACK, BrokerOptions, EmbeddedBroker, free_port
from streamjoin.dev.process import WorkerProcess

#: the repository root: workers run here, so the benchmarks' own apps are found by
#: module name (``benchmarks.restore.app:app``)
ROOT = Path(__file__).resolve().parents[2]

POLL_INTERVAL_S = 0.1
STOP_TIMEOUT_S = 10.0


class BenchError(Exception):
    """A run that cannot give a figure (a worker died, a wait timed out)."""


def exit_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so the workers and the broker are stopped."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


@contextlib.contextmanager
def run_directory(prefix: str, *, keep: bool = False, given: Path | None = None) -> Iterator[Path]:
    """The run's working directory (worker logs and data), kept when the block fails.

    *given*: that directory, created if needed and always kept; otherwise a new
    temporary one, removed when the block ends normally unless *keep*.
    """
    path = given if given is not None else Path(tempfile.mkdtemp(prefix=prefix))
    path.mkdir(parents=True, exist_ok=True)
    say(f"working directory (worker logs, data): {path}")
    try:
        yield path
    except BaseException:
        say(f"(worker logs and data kept in {path})")
        raise
    if keep or given is not None:
        say(f"(worker logs and data kept in {path})")
    else:
        shutil.rmtree(path, ignore_errors=True)


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
) -> WorkerProcess:
    """One worker of *app* (not started), named *name* in *workdir*.

    It runs in the repository root, which is on its path (the benchmarks' own apps
    are ``benchmarks.<subject>.<module>:app``); with *web_port*, its web server
    listens there on loopback.
    """
    return WorkerProcess(
        app,
        broker.url,
        workdir / f"data-{name}",
        workdir / f"{name}.log",
        env=env,
        extra_args=web_args(web_port) if web_port is not None else (),
        cwd=ROOT,
    )


class ScriptProcess(WorkerProcess):
    """A ``python -m <module> <args>`` child process (not a ``streamjoin worker``).

    Started, watched and stopped like a worker (own process group, stopped by its
    group id; own log file); used for the benchmarks' passes that are not faust apps.
    """

    def __init__(
        self, module: str, args: Sequence[str], workdir: Path, name: str, *, cwd: Path = ROOT
    ) -> None:
        super().__init__(module, "", workdir / f"data-{name}", workdir / f"{name}.log", cwd=cwd)
        self.module = module
        self.args = list(args)

    def start(self) -> ScriptProcess:
        """Start the process; its output is appended to its log file."""
        self.datadir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(self.cwd), env.get("PYTHONPATH", "")) if p
        )
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.module, *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(self.cwd),
                start_new_session=True,
            )
        return self


def script(module: str, args: Sequence[str], workdir: Path, name: str) -> ScriptProcess:
    """``python -m`` *module* *args* (not started), named *name* in *workdir*: its log is
    ``<workdir>/<name>.log``, its own directory ``<workdir>/data-<name>``."""
    return ScriptProcess(module, args, workdir, name)


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


class Workers:
    """Workers of one app, named, each with its own web port on loopback.

    Watched as one by :func:`watch` (running while all run).  Leaving the block
    stops every worker started (SIGTERM, SIGKILL after *stop_timeout*), or with
    *kill* SIGKILLs them at once.
    """

    def __init__(
        self,
        app: str,
        broker: EmbeddedBroker,
        workdir: Path,
        env: Mapping[str, str],
        *,
        kill: bool = False,
        stop_timeout: float = STOP_TIMEOUT_S,
    ) -> None:
        self.app = app
        self.broker = broker
        self.workdir = workdir
        self.env = env
        self.kill = kill
        self.stop_timeout = stop_timeout
        self.processes: dict[str, WorkerProcess] = {}
        self.ports: dict[str, int] = {}

    def start(self, name: str) -> WorkerProcess:
        """Start the worker *name* on a free web port."""
        port = free_port()
        process = worker(self.app, self.broker, self.workdir, name, env=self.env, web_port=port)
        self.processes[name], self.ports[name] = process, port
        return process.start()

    def get(self, name: str, path: str) -> Any | None:
        """``GET`` *path* of the worker *name*, decoded (``None``: no answer)."""
        return http_json(f"http://{LOOPBACK}:{self.ports[name]}{path}")

    def answers(self, path: str) -> dict[str, Any]:
        """Worker name -> its answer to ``GET`` *path* (running workers, by name)."""
        return {
            name: self.get(name, path)
            for name, process in sorted(self.processes.items())
            if process.running()
        }

    def running(self) -> bool:
        """True while every worker started runs."""
        return bool(self.processes) and all(p.running() for p in self.processes.values())

    def returncode(self) -> int | None:
        """The exit status of a worker that exited (``None``: all run)."""
        codes = [p.returncode() for p in self.processes.values() if not p.running()]
        return codes[0] if codes else None

    @property
    def log_path(self) -> str:
        """Every worker's log."""
        return ", ".join(str(p.log_path) for p in self.processes.values())

    def check(self) -> None:
        """Raise :class:`BenchError` naming a worker that exited."""
        for name, process in self.processes.items():
            if not process.running():
                raise BenchError(f"{name} exited; its log: {process.log_path}")

    def __enter__(self) -> Workers:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for process in self.processes.values():
            if self.kill:
                process.kill()
            else:
                process.stop(timeout=self.stop_timeout)


class Watched(Protocol):
    """What :func:`watch` needs of a worker (or of :class:`Workers`)."""

    @property
    def log_path(self) -> Any: ...

    def running(self) -> bool: ...

    def returncode(self) -> int | None: ...


def watch(
    name: str,
    process: Watched,
    count: Callable[[], int | None],
    expected: int,
    timeout: float,
    *,
    memory_of: int | None = None,
) -> Throughput:
    """Poll *count* until it reaches *expected*; time the pass from its first record.

    With *memory_of* (a pid), that process's resident set size is read at each
    poll from the first processed record on (:attr:`Throughput.memory`), and
    shown on the progress lines.

    Raises:
        BenchError: the worker exited, or *timeout* seconds passed first.
    """
    started = time.monotonic()
    deadline = started + timeout
    progress = Progress(started)
    first: Sample | None = None
    memory: list[tuple[int, int]] = []
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
            rss = process_rss_bytes(memory_of) if memory_of is not None else None
            if rss is not None:
                memory.append((seen, rss))
            if seen >= expected:
                last = Sample(at, seen)
                return Throughput(name, expected, first, last, first.at - started, tuple(memory))
        if progress.due(after):
            if first is None:
                say(f"  {name}: starting ({after - started:.0f}s)")
            else:
                done = (seen or first.count) - first.count
                rate = done / max(after - first.at, 1e-9)
                held = f", {memory[-1][1] / 2**20:,.0f} MiB resident" if memory else ""
                say(f"  {name}: {seen or 0:,}/{expected:,} records ({rate:,.0f}/s{held})")
        if after >= deadline:
            raise BenchError(
                f"{name}: {seen or 0:,} of {expected:,} records processed after "
                f"{timeout:.0f}s; its log: {process.log_path}"
            )
        time.sleep(POLL_INTERVAL_S)
