"""A worker of the broker tests' windowed join (``apps/windowed.py``) with its web
page on, and that page's view of the join (``paid``)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from streamjoin.dev.broker import EmbeddedBroker, free_port
from streamjoin.dev.process import WorkerProcess

APPS_DIR = Path(__file__).resolve().parent  # apps/ lives beside the tests


def start_windowed_worker(
    broker: EmbeddedBroker, tmp_path: Path, app_id: str, batch_max: int
) -> tuple[WorkerProcess, int]:
    """A started worker of the windowed join on *app_id*'s topics, and its web port."""
    port = free_port()
    worker = WorkerProcess(
        "apps.windowed:app",
        broker.url,
        tmp_path / "w",
        tmp_path / "w.log",
        env={"SJ_TEST_APP_ID": app_id, "SJ_TEST_BATCH_MAX": str(batch_max)},
        extra_args=["--with-web", "--web-port", str(port), "--web-bind", "127.0.0.1"],
        cwd=APPS_DIR,
    ).start()
    return worker, port


def join_page(port: int) -> dict[str, Any] | None:
    """The join ``paid`` on ``/streamjoin/joins/`` of the worker at *port* (``None``:
    no answer yet)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/streamjoin/joins/", timeout=2) as response:
            return json.loads(response.read())["paid"]  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError):
        return None
