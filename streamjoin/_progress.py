"""Rate-limited progress lines: the one progress logger of long-running work.

A join and the archive sink each log a line now and then while records flow;
:class:`ProgressLog` decides when (at most once per interval, and only when
something changed since the last line) and computes the rate of a count
since the last line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable

__all__ = ["ProgressLog"]

#: a progress line: (format, *arguments) for ``logger.info``, given the rate per second
Line = Callable[[float], tuple[object, ...]]


class ProgressLog:
    """Logs progress lines to *logger*, at most once per *interval* seconds.

    Attributes:
        interval: seconds between lines, at least (may be changed any time).
    """

    def __init__(self, logger: logging.Logger, interval: float = 10.0) -> None:
        self._logger = logger
        self.interval = interval
        self._at = time.monotonic()
        self._count = 0
        self._state: Hashable = None

    def maybe_log(self, now: float, count: int, state: Hashable, line: Line) -> bool:
        """Log ``line(rate)`` if *interval* seconds passed since the last line and
        *state* changed; the rate is *count*'s growth per second since then.
        Returns whether a line was logged."""
        if now - self._at < self.interval or state == self._state:
            return False
        rate = (count - self._count) / max(now - self._at, 1e-9)
        self._at, self._count, self._state = now, count, state
        fmt, *args = line(rate)
        self._logger.info(str(fmt), *args)
        return True
