"""Crash points in a join batch's durability steps, for tests that crash a worker there.

``STREAMJOIN_FAULT_POINT=<point>:<n>`` makes the worker exit at once
(``os._exit(70)``: no cleanup, as ``kill -9`` would) the *n*-th time it
reaches *point* (``<n>`` defaults to 1). Unset, a point costs one comparison.
The points, in the order a batch reaches them (see
:mod:`~streamjoin.faust.join.batch`):

* ``outputs-sent``: step 1's outputs handed to the producer, not acknowledged;
* ``outputs-acked``: step 1 acknowledged (outputs, then state changes), the
  positions not sent;
* ``positions-sent``: step 2's records handed to the producer, not acknowledged;
* ``positions-acked``: step 2 acknowledged, RocksDB not written;
* ``rocksdb-written``: step 3 done, the input records not acked;
* ``acked``: step 4 done.
"""

from __future__ import annotations

import logging
import os

__all__ = ["ENV", "POINTS", "FaultPoints"]

logger = logging.getLogger(__name__)

ENV = "STREAMJOIN_FAULT_POINT"
#: exit status of a worker crashed at a fault point
EXIT_STATUS = 70
POINTS = (
    "outputs-sent",
    "outputs-acked",
    "positions-sent",
    "positions-acked",
    "rocksdb-written",
    "acked",
)


class FaultPoints:
    """The crash point of this process, read once from :data:`ENV`."""

    def __init__(self, spec: str | None = None) -> None:
        spec = os.environ.get(ENV, "") if spec is None else spec
        self.point: str | None = None
        self.left = 0
        if not spec:
            return
        name, _, count = spec.partition(":")
        if name not in POINTS or (count and not count.isdigit()) or count == "0":
            raise ValueError(
                f"{ENV}={spec!r}: expected <point>[:<n>] with a point of {', '.join(POINTS)} "
                "and n >= 1"
            )
        self.point = name
        self.left = int(count or 1)

    def reached(self, point: str) -> None:
        """Exit the process at once if this is the crash point's *n*-th time."""
        if point != self.point:
            return
        self.left -= 1
        if self.left == 0:
            logger.warning("fault point %s reached: the worker exits now", point)
            logging.shutdown()
            os._exit(EXIT_STATUS)
