"""Ask for the follow-up rebalance once this worker's warm-ups caught up.

A warm-up replica is restored like a standby; the task moves to it only at a
rebalance that finds it caught up. Kafka Streams waits for a probing
rebalance (10 minutes by default); a streamjoin worker asks for the
rebalance itself, seconds after the last of its warm-ups came within
``acceptable_recovery_lag`` of its changelog's end (the same rule the leader
applies to the offsets members report).

Never in a loop: one request per set of warm-ups, and when the same set is
still there after the rebalance (the leader saw it differently), the next
request for it waits twice as long as the last, up to ten minutes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

__all__ = ["WarmupWatch", "reported_lag"]

logger = logging.getLogger(__name__)

#: seconds before the first request for a new set, and the cap of the back-off
FIRST_DELAY = 0.0
REPEAT_DELAY = 15.0
MAX_DELAY = 600.0


def reported_lag(highwater: int | None, applied: int | None) -> int | None:
    """A warm-up changelog partition's lag as the leader will see it.

    ``None`` (not known yet) until a fetch answered with the changelog's end
    (*highwater*), and while nothing of a non-empty changelog is applied
    (*applied*: the offset of the last record applied): the member reports
    no offset for the partition then, and the leader takes a member without
    an offset for not caught up. Counting such a partition as ``highwater``
    records behind asked for a follow-up rebalance that moved nothing (every
    changelog shorter than the acceptable lag looked caught up before its
    first record was read), and the next request for the same warm-ups then
    waited out the back-off (15 s in the rebalance benchmark's scale-out).
    """
    if highwater is None:
        return None
    if applied is None:
        return 0 if highwater <= 0 else None
    return max(0, highwater - (applied + 1))


class WarmupWatch:
    """Decides when this worker asks the group for a follow-up rebalance.

    Arguments:
        request: asks for the rebalance; returns ``False`` when it could not.
        clock: monotonic seconds (a parameter for tests).
    """

    def __init__(
        self, request: Callable[[], bool], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._request = request
        self._clock = clock
        self._last_set: frozenset[tuple[int, int]] = frozenset()
        self._next_allowed = 0.0
        self._delay = REPEAT_DELAY
        #: requests made, for the assignment page
        self.requests = 0

    def check(
        self,
        tasks: Mapping[tuple[int, int], list[int | None]],
        acceptable_lag: int,
    ) -> bool:
        """Request the rebalance when every warm-up task is caught up; ``True`` if requested.

        Arguments:
            tasks: (task group, partition) -> lag of each of its warm-up
                changelog partitions (``None``: not known yet).
            acceptable_lag: records a task may be behind and count as caught up.
        """
        if not tasks:
            return False
        lagging = 0
        for lags in tasks.values():
            if any(lag is None for lag in lags):
                return False
            if sum(lag for lag in lags if lag is not None) > acceptable_lag:
                lagging += 1
        if lagging:
            return False
        current = frozenset(tasks)
        now = self._clock()
        if current == self._last_set:
            if now < self._next_allowed:
                return False
            self._delay = min(self._delay * 2, MAX_DELAY)
        else:
            self._delay = REPEAT_DELAY
        if not self._request():
            return False
        self.requests += 1
        self._last_set = current
        self._next_allowed = now + self._delay
        logger.info(
            "streamjoin: %d warm-up task(s) caught up (each within %d records of its "
            "changelog's end); requesting a follow-up rebalance to move them here "
            "(request %d; the same set again not before %.0fs)",
            len(current),
            acceptable_lag,
            self.requests,
            self._delay,
        )
        return True
