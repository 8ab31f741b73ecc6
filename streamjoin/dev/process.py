"""Run ``streamjoin worker`` as a child process (tests, benchmarks, the demo).

Each worker runs in its own process group and logs to its own file; it is
stopped or killed by that group id, never by name.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["EMBEDDED_REJOIN_PACE_MS", "WorkerProcess"]

#: the rejoin pace of workers this launcher starts (on the embedded broker), in
#: milliseconds: what the fixed pace was before it became opt-in (issue 39)
EMBEDDED_REJOIN_PACE_MS = "1200"

_CLI = "from streamjoin.cli import main; main()"


class WorkerProcess:
    """One ``streamjoin worker`` child process.

    Arguments:
        app: ``module:attribute`` of the app.
        broker: broker URL passed as ``--broker``.
        datadir: the worker's data directory (created if missing).
        log_path: file receiving the worker's stdout and stderr.
        env: extra environment variables.
        extra_args: more ``streamjoin worker`` options.
        cwd: working directory (also put on ``PYTHONPATH``).
    """

    def __init__(
        self,
        app: str,
        broker: str,
        datadir: Path,
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        cwd: Path | None = None,
    ) -> None:
        self.app = app
        self.broker = broker
        self.datadir = datadir
        self.log_path = log_path
        self.env = dict(env or {})
        self.extra_args = list(extra_args)
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def pid(self) -> int | None:
        """Process id, ``None`` before :meth:`start`."""
        return self.process.pid if self.process is not None else None

    def start(self) -> WorkerProcess:
        """Start the worker; the log file is appended to, so restarts keep history."""
        self.datadir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        # the embedded broker answers followers' SyncGroups late: pace rejoins
        # (streamjoin.faust.kafka.cooperative), unless the caller says otherwise
        env.setdefault("STREAMJOIN_REJOIN_PACE_MS", EMBEDDED_REJOIN_PACE_MS)
        env.update(self.env)
        if self.cwd is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(self.cwd), env.get("PYTHONPATH", "")) if p
            )
        argv = [
            sys.executable,
            "-c",
            _CLI,
            "worker",
            "-A",
            self.app,
            "--broker",
            self.broker,
            "--datadir",
            str(self.datadir),
            "--loglevel",
            "info",
            *self.extra_args,
        ]
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(self.cwd) if self.cwd is not None else None,
                start_new_session=True,
            )
        return self

    def running(self) -> bool:
        """``True`` while the process is alive."""
        return self.process is not None and self.process.poll() is None

    def log_text(self, *, since_start: bool = True) -> str:
        """The worker's log (by default only what this run wrote)."""
        if not self.log_path.exists():
            return ""
        data = self.log_path.read_bytes()
        return (
            data[self._log_offset :].decode(errors="replace")
            if since_start
            else data.decode(errors="replace")
        )

    def wait_for_log(self, pattern: str, timeout: float, *, count: int = 1) -> list[str]:
        """Wait until *pattern* (a regex) matched *count* lines of this run's log.

        Raises:
            TimeoutError: not seen within *timeout* seconds, or the worker exited.
        """
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            lines = [line for line in self.log_text().splitlines() if regex.search(line)]
            if len(lines) >= count:
                return lines
            if not self.running():
                raise TimeoutError(f"worker exited (status {self.returncode()}) before {pattern!r}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{pattern!r} not logged within {timeout:.0f}s")
            time.sleep(0.05)

    def returncode(self) -> int | None:
        """Exit status, ``None`` while running."""
        return self.process.poll() if self.process is not None else None

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 20.0) -> int | None:
        """Send *sig* to the worker's process group and wait up to *timeout* for it to exit."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
                if sig != signal.SIGKILL:
                    os.killpg(process.pid, signal.SIGCONT)  # a frozen worker must run to stop
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                if sig != signal.SIGKILL:
                    self._report_hang(sig, timeout)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=timeout)
        return process.returncode

    def _report_hang(self, sig: int, timeout: float) -> None:
        """The worker ignored *sig* for *timeout* s: have it dump its threads'
        stacks and its event loops' tasks (SIGQUIT, see ``streamjoin._stacks``)
        and print the end of its log to stderr, where a failing test shows it."""
        process = self.process
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGQUIT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=3.0)
        tail = self.log_text().splitlines()[-600:]
        print(
            f"--- {self.log_path.name} (pid {process.pid}) still running {timeout:.0f}s after "
            f"signal {sig}; the end of its log:",
            *tail,
            sep="\n",
            file=sys.stderr,
        )

    def freeze(self) -> None:
        """SIGSTOP the worker's process group: a frozen machine, a long GC pause.

        The worker keeps its sockets and its place in the group until its
        session times out; :meth:`thaw` lets it run on from where it stopped.
        """
        self._signal_group(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT the worker's process group (after :meth:`freeze`)."""
        self._signal_group(signal.SIGCONT)

    def _signal_group(self, sig: int) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            raise RuntimeError(f"worker {self.log_path.name} is not running")
        os.killpg(process.pid, sig)

    def stop(self, timeout: float = 20.0) -> int | None:
        """Graceful stop (SIGTERM), SIGKILL after *timeout*."""
        return self.kill(signal.SIGTERM, timeout)
