"""The generic windowed join (``apps/windowed.py``) that logs which partitions its
aiokafka fetcher itself holds: a line ``fetcher holds [...] of [...]`` (JSON
lists of ``topic:partition``) each time the paused or the assigned set
changes, looked at every 2 ms from a thread of its own (faust starts an app's
tasks only once its tables are restored).

Environment: that of ``apps/windowed.py``.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from apps.windowed import app
from streamjoin.faust.kafka.session import app_aiokafka_consumer

logger = logging.getLogger(__name__)


def _names(tps: object) -> list[str]:
    return sorted(f"{tp.topic}:{tp.partition}" for tp in tps)  # type: ignore[attr-defined]


def _log_fetcher_holds() -> None:
    last = None
    while True:
        aio = app_aiokafka_consumer(app)
        if aio is not None:
            try:  # read from this thread while the consumer's changes them
                now = (_names(aio.paused()), _names(aio.assignment()))
            except RuntimeError:
                now = last
            if now != last and now is not None:
                logger.warning("fetcher holds %s of %s", json.dumps(now[0]), json.dumps(now[1]))
                last = now
        time.sleep(0.002)


threading.Thread(target=_log_fetcher_holds, name="fetcher-holds", daemon=True).start()
