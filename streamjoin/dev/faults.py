"""A fault-injecting TCP proxy in front of the embedded broker: cut, stall, slow, heal.

Every connection a client opens to the proxy is forwarded to the broker; the
broker advertises the proxy's address (see
:attr:`~streamjoin.dev.broker.BrokerOptions.advertised_port`), so every
connection of every client (bootstrap, partition leaders, the group
coordinator) passes through it. Faults apply to all connections, open ones
and those opened later, until :meth:`FaultProxy.heal`:

* :meth:`~FaultProxy.cut`: close every open connection now (clients reconnect);
* :meth:`~FaultProxy.cut_after`: close each connection once it has forwarded
  *n* more bytes (a connection dropped mid-request or mid-response);
* :meth:`~FaultProxy.stall`: forward nothing for *seconds* (connections stay
  open, new ones are accepted and held): a network that stops answering;
* :meth:`~FaultProxy.slow`: delay every chunk by *latency* seconds and/or
  pace it to *bandwidth* bytes per second;
* :meth:`~FaultProxy.heal`: back to plain forwarding.

The proxy runs its own event loop in a daemon thread, so a test (or
``streamjoin broker --faults``) scripts it from ordinary code. It listens on
loopback only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from streamjoin.dev.broker import BrokerOptions, EmbeddedBroker
from streamjoin.dev.errors import BrokerStartError

__all__ = ["COMMANDS", "BrokerBehindProxy", "FaultProxy", "Faults", "run_command"]

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
#: bytes read from a socket at a time
CHUNK = 64 * 1024

T = TypeVar("T")


@dataclass(frozen=True)
class Faults:
    """The faults in force (all off: plain forwarding)."""

    #: monotonic time until which nothing is forwarded (0: no stall)
    stalled_until: float = 0.0
    #: seconds added before each chunk is forwarded
    latency: float = 0.0
    #: bytes per second each direction of a connection may forward (0: unlimited)
    bandwidth: int = 0
    #: bytes a connection may still forward before it is cut (``None``: no limit)
    cut_after: int | None = None


class FaultProxy:
    """Forwards loopback TCP connections to *upstream*, with faults on demand.

    Arguments:
        upstream_port: the broker's port on 127.0.0.1.
        port: the proxy's port (``0``: a free one, see :attr:`port` once started).
        listener: a socket already bound (and listening) on 127.0.0.1 to serve
            on instead of *port*: nobody can take its port in the meantime.
    """

    def __init__(
        self, upstream_port: int, port: int = 0, listener: socket.socket | None = None
    ) -> None:
        self.upstream_port = upstream_port
        self.port = port if listener is None else int(listener.getsockname()[1])
        self._listener = listener
        self.faults = Faults()
        #: connections opened and cut so far (for tests and the CLI)
        self.opened = 0
        self.cuts = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[_Connection] = set()
        #: set (and replaced) whenever the faults change; made on the proxy's loop
        self._changed = asyncio.Event()

    # -- life cycle ------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> FaultProxy:
        """Start listening (in a daemon thread); returns once connections are accepted."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # reported to start()
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._close_all())
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            # let the aborted transports' connection_lost callbacks close their sockets
            loop.run_until_complete(asyncio.sleep(0.05))
            loop.close()

        self._thread = threading.Thread(target=run, name="streamjoin-fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or failure:
            raise BrokerStartError(
                f"the fault proxy could not listen on {LOOPBACK}:{self.port}"
                + (f": {failure[0]}" if failure else "")
            )
        return self

    def stop(self) -> None:
        """Close every connection and stop listening."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._loop = self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> str:
        """``host:port`` clients connect to."""
        return f"{LOOPBACK}:{self.port}"

    # -- faults (callable from any thread) ----------------------------------------------

    def cut(self) -> int:
        """Close every open connection now; returns how many were closed."""
        return self._call(self._cut_all())

    def cut_after(self, n: int) -> None:
        """Close each connection once it has forwarded *n* more bytes (either way)."""
        if n < 0:
            raise ValueError(f"cut_after needs a byte count >= 0, got {n}")
        self._set(cut_after=n)

    def stall(self, seconds: float) -> None:
        """Forward nothing for *seconds* from now (connections stay open)."""
        if seconds < 0:
            raise ValueError(f"stall needs seconds >= 0, got {seconds}")
        self._set(stalled_until=time.monotonic() + seconds)

    def slow(self, *, latency: float = 0.0, bandwidth: int = 0) -> None:
        """Delay every chunk by *latency* s; pace each direction to *bandwidth* B/s."""
        if latency < 0 or bandwidth < 0:
            raise ValueError("slow needs latency >= 0 and bandwidth >= 0")
        self._set(latency=latency, bandwidth=bandwidth)

    def heal(self) -> None:
        """Plain forwarding again (a stall under way ends now)."""
        self._set(stalled_until=0.0, latency=0.0, bandwidth=0, cut_after=None)

    def _set(self, **changes: object) -> None:
        """Change the faults on the proxy's loop; returns once they are in force."""

        async def apply() -> None:
            self.faults = replace(self.faults, **changes)  # type: ignore[arg-type]
            for conn in self._conns:
                conn.budget = self.faults.cut_after
            self._changed.set()
            self._changed = asyncio.Event()

        self._call(apply())

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(
            coro, self._running_loop()
        )
        return future.result(timeout=10)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the fault proxy is not running: call start() first")
        return self._loop

    # -- the proxy (on its loop) -------------------------------------------------------

    async def _serve(self) -> None:
        self._changed = asyncio.Event()  # bound to this loop
        if self._listener is not None:
            self._server = await asyncio.start_server(self._accept, sock=self._listener)
        else:
            self._server = await asyncio.start_server(self._accept, LOOPBACK, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        try:
            await self._hold_while_stalled()
            up_reader, up_writer = await asyncio.open_connection(LOOPBACK, self.upstream_port)
        except OSError:
            writer.close()
            return
        conn = _Connection(self, writer, up_writer, self.faults.cut_after)
        self._conns.add(conn)
        try:
            await asyncio.gather(conn.pump(reader, up_writer), conn.pump(up_reader, writer))
        finally:
            self._conns.discard(conn)
            conn.close()

    async def _hold_while_stalled(self) -> None:
        while True:
            left = self.faults.stalled_until - time.monotonic()
            if left <= 0:
                return
            # heal() or a new stall sets the event: look again at once
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)

    async def _cut_all(self) -> int:
        conns = list(self._conns)
        for conn in conns:
            conn.close()
        self.cuts += len(conns)
        return len(conns)

    async def _close_all(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut_all()


class _Connection:
    """One client connection and its upstream connection."""

    def __init__(
        self,
        proxy: FaultProxy,
        client: asyncio.StreamWriter,
        upstream: asyncio.StreamWriter,
        budget: int | None,
    ) -> None:
        self.proxy = proxy
        self.writers = (client, upstream)
        self.budget = budget
        self.closed = False

    async def pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward *reader* to *writer* chunk by chunk, under the faults in force."""
        proxy = self.proxy
        try:
            while not self.closed:
                data = await reader.read(CHUNK)
                if not data:
                    break
                await proxy._hold_while_stalled()
                faults = proxy.faults
                if faults.latency:
                    await asyncio.sleep(faults.latency)
                if self.budget is not None:
                    if len(data) >= self.budget:
                        writer.write(data[: self.budget])
                        proxy.cuts += 1
                        break
                    self.budget -= len(data)
                writer.write(data)
                await writer.drain()
                if faults.bandwidth:
                    await asyncio.sleep(len(data) / faults.bandwidth)
        except (ConnectionError, OSError):
            pass
        finally:
            self.close()

    def close(self) -> None:
        """Drop both connections at once (a reset, not a graceful close)."""
        if self.closed:
            return
        self.closed = True
        for writer in self.writers:
            with contextlib.suppress(Exception):
                writer.transport.abort()


class BrokerBehindProxy:
    """An embedded broker that advertises a :class:`FaultProxy` in front of it.

    Clients bootstrap to :attr:`bootstrap` (the proxy); the broker's metadata
    names the proxy too, so no connection bypasses it. Use it as a context
    manager, or :meth:`start` and :meth:`stop`.
    """

    def __init__(self, options: BrokerOptions | None = None, port: int = 0) -> None:
        # the proxy's port is bound now, before the broker picks its own: a port
        # only looked up as free could be taken by then (the broker's, a client's)
        self._listener: socket.socket | None = socket.create_server((LOOPBACK, port))
        #: the proxy's port (clients connect here); the broker takes *options*' port
        self.proxy_port = int(self._listener.getsockname()[1])
        base = options or BrokerOptions()
        self.broker = EmbeddedBroker(replace(base, advertised_port=self.proxy_port))
        self.proxy: FaultProxy | None = None

    @property
    def bootstrap(self) -> str:
        """The proxy's address, ``127.0.0.1:<port>``."""
        return f"{LOOPBACK}:{self.proxy_port}"

    @property
    def url(self) -> str:
        """The faust broker URL of the proxy."""
        return f"kafka://{self.bootstrap}"

    def start(self) -> BrokerBehindProxy:
        """Start the broker, then the proxy on the port the broker advertises."""
        if self._listener is None:
            raise BrokerStartError("a stopped BrokerBehindProxy cannot start again: make a new one")
        self.broker.start()
        try:
            self.proxy = FaultProxy(self.broker.port, listener=self._listener).start()
        except BaseException:
            self.broker.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the proxy, then the broker (by its process group)."""
        if self.proxy is not None:
            self.proxy.stop()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self.broker.stop()

    def __enter__(self) -> BrokerBehindProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: what ``streamjoin broker --faults`` reads on its standard input, one per line
COMMANDS = {
    "cut": "close every open connection now",
    "cut-after N": "close each connection once it forwarded N more bytes",
    "stall S": "forward nothing for S seconds",
    "slow MS [BYTES_PER_S]": "delay every chunk by MS milliseconds (and pace it)",
    "heal": "plain forwarding again",
    "status": "the faults in force and the connections opened and cut",
    "help": "this list",
}


def run_command(proxy: FaultProxy, line: str) -> str:
    """Carry out one fault command (see :data:`COMMANDS`); returns the reply.

    Raises:
        ValueError: an unknown command or bad arguments, with the usage.
    """
    words = line.split()
    if not words:
        return ""
    name, args = words[0].lower(), words[1:]
    try:
        if name == "cut" and not args:
            return f"cut {proxy.cut()} connection(s)"
        if name == "cut-after" and len(args) == 1:
            proxy.cut_after(int(args[0]))
            return f"each connection is cut after {int(args[0])} more bytes"
        if name == "stall" and len(args) == 1:
            proxy.stall(float(args[0]))
            return f"nothing forwarded for {float(args[0])} s"
        if name == "slow" and 1 <= len(args) <= 2:
            latency_ms = float(args[0])
            bandwidth = int(args[1]) if len(args) == 2 else 0
            proxy.slow(latency=latency_ms / 1000, bandwidth=bandwidth)
            paced = f", {bandwidth} bytes/s" if bandwidth else ""
            return f"every chunk delayed {latency_ms:g} ms{paced}"
        if name == "heal" and not args:
            proxy.heal()
            return "healed: plain forwarding"
        if name == "status" and not args:
            f = proxy.faults
            stall = max(0.0, f.stalled_until - time.monotonic())
            return (
                f"stall {stall:.1f} s left, latency {f.latency * 1000:g} ms, "
                f"bandwidth {f.bandwidth or 'unlimited'}, cut after {f.cut_after}; "
                f"{proxy.opened} connection(s) opened, {proxy.cuts} cut"
            )
        if name == "help" and not args:
            return "\n".join(f"{usage:<24} {what}" for usage, what in COMMANDS.items())
    except ValueError as exc:
        raise ValueError(f"{line.strip()!r}: {exc}") from None
    usage = ", ".join(COMMANDS)
    raise ValueError(f"{line.strip()!r}: not a fault command; use one of: {usage}")
