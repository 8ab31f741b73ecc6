"""A Kafka-protocol proxy for tests that gives the one-node embedded broker racks.

The embedded broker (Tansu, node 111) has no ``broker.rack`` and no other
brokers, so every partition's replicas are ``[111]`` on no rack. This proxy
sits in front of it on loopback and forwards every request and response as it
is, except **Metadata responses** (api key 3), which it decodes with aiokafka's
``MetadataResponse_vN`` of the version asked for and re-encodes with:

* the brokers of :attr:`MetadataProxy.racks`: the real node with a rack, and
  fake nodes (their ids and racks) the broker does not have;
* every broker's host and port set to one of the proxy's own listeners (one
  per node id), so clients keep talking through the proxy: aiokafka sends its
  periodic Metadata requests to a random known broker, so it does connect to
  the fake ones, and those connections reach the real broker too;
* each partition's replicas (and ISR) set by ``replicas_of(topic, partition)``,
  its leader kept (the real node): fetches and produces go where they went.

Requests are tracked per connection by correlation id (from the request
header: size, api_key, api_version, correlation_id), so the proxy knows which
response is a Metadata response and of which version. Versions 1 to 5 are
rewritten (aiokafka 0.14 asks for 5 at most); a Metadata response of another
version, or one the rewrite fails on, is forwarded unchanged, counted in
:attr:`MetadataProxy.unrewritten` and explained in :attr:`MetadataProxy.errors`.
Other responses carrying broker addresses (``FindCoordinator``) are forwarded
unchanged: group traffic may go to the broker directly.

Like :class:`streamjoin.dev.faults.FaultProxy`, it runs its own event loop in a
daemon thread and listens on 127.0.0.1 only; :meth:`MetadataProxy.stop` closes
every connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiokafka.protocol.metadata import (
    MetadataResponse_v1,
    MetadataResponse_v2,
    MetadataResponse_v3,
    MetadataResponse_v4,
    MetadataResponse_v5,
)

__all__ = ["METADATA", "MetadataProxy"]

LOOPBACK = "127.0.0.1"
#: the Metadata API key
METADATA = 3
#: version -> the response class that version is decoded and encoded with
RESPONSES: dict[int, Any] = {  # Any: aiokafka's response classes are untyped
    1: MetadataResponse_v1,
    2: MetadataResponse_v2,
    3: MetadataResponse_v3,
    4: MetadataResponse_v4,
    5: MetadataResponse_v5,
}
#: a frame larger than this is not Kafka's (a client speaking something else)
MAX_FRAME = 256 * 1024 * 1024


class MetadataProxy:
    """Forwards loopback connections to the broker on *upstream_port*, giving
    its Metadata responses the brokers of *racks* and the replicas of *replicas_of*.

    Arguments:
        upstream_port: the broker's port on 127.0.0.1.
        real_node: the broker's node id (its Metadata lists it alone).
        racks: node id -> rack of every broker the clients should see
            (*real_node* and the fake ones).
        replicas_of: ``(topic, partition) -> node ids``, the replicas a
            partition should list; every id must be a key of *racks*.
    """

    def __init__(
        self,
        upstream_port: int,
        *,
        real_node: int,
        racks: Mapping[int, str],
        replicas_of: Callable[[str, int], Sequence[int]],
    ) -> None:
        if real_node not in racks:
            raise ValueError(f"the real node {real_node} needs a rack in {dict(racks)}")
        self.upstream_port = upstream_port
        self.real_node = real_node
        self.racks = dict(sorted(racks.items()))
        self.replicas_of = replicas_of
        # bound now: nobody can take a port between choosing it and serving on it
        self._listeners = {node: socket.create_server((LOOPBACK, 0)) for node in self.racks}
        #: node id -> the port the proxy serves it on
        self.ports = {node: int(s.getsockname()[1]) for node, s in self._listeners.items()}
        #: connections opened, per node id the client connected to
        self.connections: Counter[int] = Counter()
        #: requests forwarded, per (node id connected to, api key)
        self.requests: Counter[tuple[int, int]] = Counter()
        #: Metadata responses rewritten, per version
        self.rewritten: Counter[int] = Counter()
        #: Metadata responses forwarded unchanged, per version (none expected)
        self.unrewritten: Counter[int] = Counter()
        #: why each of those was not rewritten
        self.errors: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    # -- addresses ---------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the real node's listener (clients bootstrap here)."""
        return f"{LOOPBACK}:{self.ports[self.real_node]}"

    @property
    def url(self) -> str:
        """The faust broker URL of :attr:`bootstrap`."""
        return f"kafka://{self.bootstrap}"

    # -- life cycle --------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> MetadataProxy:
        """Serve every listener (in a daemon thread); returns once they accept."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                servers = loop.run_until_complete(self._serve())
            except BaseException as exc:  # reported to start()
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            for server in servers:
                server.close()
            for writer in list(self._writers):
                with contextlib.suppress(Exception):
                    writer.transport.abort()
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(asyncio.sleep(0.05))  # aborted transports close
            loop.close()

        self._thread = threading.Thread(target=run, name="metadata-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or failure:
            self._close_listeners()
            raise RuntimeError(f"the metadata proxy did not start: {failure or 'timed out'}")
        return self

    def stop(self) -> None:
        """Close every connection and listener."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
        self._loop = self._thread = None
        self._close_listeners()

    def __enter__(self) -> MetadataProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _close_listeners(self) -> None:
        for listener in self._listeners.values():
            listener.close()

    # -- the rewrite (pure) --------------------------------------------------------------

    def rewrite(self, version: int, body: bytes) -> bytes:
        """The Metadata response body (after the correlation id) of *version*, rewritten."""
        cls = RESPONSES[version]
        response = cls.decode(body)
        fields = {name: response.get_item(name) for name in cls.SCHEMA.names}
        if not fields["brokers"]:  # no layout yet: nothing to give racks to
            return body
        fields["brokers"] = [
            (node, LOOPBACK, self.ports[node], rack) for node, rack in self.racks.items()
        ]
        fields["topics"] = [
            (error, topic, internal, [self._partition(topic, p) for p in partitions])
            for error, topic, internal, partitions in fields["topics"]
        ]
        return bytes(cls(**fields).encode())

    def _partition(self, topic: str, partition: tuple[Any, ...]) -> tuple[Any, ...]:
        error, index, leader, _replicas, _isr, *rest = partition
        replicas = [int(n) for n in self.replicas_of(topic, index)]
        unknown = [n for n in replicas if n not in self.racks]
        if unknown:
            raise ValueError(f"replicas {unknown} of {topic}[{index}] are no broker of the proxy")
        # v5's offline replicas: none
        return (error, index, leader, replicas, replicas, *([[]] if rest else []))

    # -- the proxy (on its loop) -------------------------------------------------------

    async def _serve(self) -> list[asyncio.base_events.Server]:
        servers = []
        for node, listener in self._listeners.items():

            async def accept(
                reader: asyncio.StreamReader, writer: asyncio.StreamWriter, node: int = node
            ) -> None:
                await self._connection(node, reader, writer)

            servers.append(await asyncio.start_server(accept, sock=listener))
        return servers

    async def _connection(
        self, node: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.connections[node] += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(LOOPBACK, self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        #: correlation id -> (api key, api version) of the requests awaiting a response
        pending: dict[int, tuple[int, int]] = {}
        try:
            await asyncio.gather(
                self._requests(node, reader, up_writer, pending),
                self._responses(up_reader, writer, pending),
            )
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                with contextlib.suppress(Exception):
                    w.transport.abort()

    async def _requests(
        self,
        node: int,
        reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int]],
    ) -> None:
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                upstream.transport.abort()
                return
            api_key, version, correlation = struct.unpack_from(">hhi", frame, 4)
            pending[correlation] = (api_key, version)
            self.requests[(node, api_key)] += 1
            upstream.write(frame)
            await upstream.drain()

    async def _responses(
        self,
        upstream: asyncio.StreamReader,
        client: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int]],
    ) -> None:
        while True:
            frame = await _read_frame(upstream)
            if frame is None:
                client.transport.abort()
                return
            (correlation,) = struct.unpack_from(">i", frame, 4)
            api_key, version = pending.pop(correlation, (-1, -1))
            if api_key == METADATA:
                try:
                    body = self.rewrite(version, frame[8:])
                except Exception as exc:  # KeyError: a version it cannot decode
                    self.unrewritten[version] += 1
                    self.errors.append(f"Metadata v{version}: {exc!r}")
                else:
                    frame = struct.pack(">ii", 4 + len(body), correlation) + body
                    self.rewritten[version] += 1
            client.write(frame)
            await client.drain()


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One size-prefixed Kafka frame (the size included), ``None`` at a clean end."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    (size,) = struct.unpack(">i", head)
    if not 0 <= size <= MAX_FRAME:
        raise ValueError(f"not a Kafka frame: size {size}")
    return head + await reader.readexactly(size)
