"""A count served over HTTP on loopback, for the benchmarks' own non-faust passes.

The bare consumer and the Quix Streams app are plain processes without faust's web
server; each serves its count at ``GET /bench/count/`` as ``{"processed": n}``, the
same answer as the faust peer's page, so the harness polls every pass alike.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: where the count is served (the faust peer's page has the same path)
COUNT_PATH = "/bench/count/"
LOOPBACK = "127.0.0.1"


def serve_counts(port: int, counts: Mapping[str, int]) -> ThreadingHTTPServer:
    """Serve *counts* (a dict the caller keeps updating; ``processed`` is the one
    polled) as JSON at :data:`COUNT_PATH` on loopback *port*, from a daemon thread.
    The server is returned (``shutdown()`` stops it)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") != COUNT_PATH.rstrip("/"):
                self.send_error(404)
                return
            body = json.dumps(dict(counts)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # ten polls a second would fill the log

    server = ThreadingHTTPServer((LOOPBACK, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="bench-count", daemon=True).start()
    return server
