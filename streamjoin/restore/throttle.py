"""How long background restoring rests, so that live work keeps its share of the machine.

Standby and warm-up replicas are restored while the worker's active tasks run, from the
same brokers and, on a small machine, on the same cores. Read at full speed, a large
catch-up (a new worker filling its warm-ups) slows every worker's produce and commit
requests, and tasks that did not move stall. :class:`RestoreThrottle` limits background
restoring to a share of the time: after a round of fetching and applying that kept
the worker busy for ``busy`` seconds (the caller measures CPU time), it rests
``busy * (1 - share) / share`` seconds.

Pure: no clock of its own, no I/O, no settings of its own; the caller measures and
sleeps, and passes the share from the restore settings.
"""

from __future__ import annotations

from streamjoin.errors import ConfigurationError

__all__ = ["RestoreThrottle", "checked_share"]


def checked_share(share: object) -> float:
    """*share* as a float, when it is a number in (0, 1].

    Raises:
        ConfigurationError: it is not a number, or not in (0, 1].
    """
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        raise ConfigurationError(
            f"the standby restore share must be a number in (0, 1], got {share!r}"
        )
    if not 0 < share <= 1:
        raise ConfigurationError(
            f"the standby restore share must be in (0, 1], got {share}; use 1 to restore "
            "standbys and warm-ups at full speed"
        )
    return float(share)


class RestoreThrottle:
    """Rest times that keep busy time at most ``share`` of wall-clock time.

    ``share`` = 1 never rests (restore at full speed). A round that applied nothing
    (the replicas are caught up and the fetch waited for new records) costs little
    and earns no rest.
    """

    __slots__ = ("_factor", "applied", "busy", "rested", "share")

    def __init__(self, share: float) -> None:
        self.share = checked_share(share)
        self._factor = (1 - self.share) / self.share
        #: totals so far: records applied, busy seconds of the rounds that applied
        #: them, seconds rested
        self.applied = 0
        self.busy = 0.0
        self.rested = 0.0

    def rest_after(self, busy_seconds: float, applied_records: int) -> float:
        """Seconds to rest after a round that took ``busy_seconds`` and applied records
        (the round is added to the totals; the caller adds the rest it took with
        :meth:`note_rest`)."""
        if applied_records <= 0 or busy_seconds <= 0:
            return 0.0
        self.applied += applied_records
        self.busy += busy_seconds
        return busy_seconds * self._factor

    def note_rest(self, seconds: float) -> None:
        """Add a rest actually taken to the totals."""
        self.rested += max(0.0, seconds)

    def totals(self) -> dict[str, float]:
        """``share``, ``applied`` records, seconds ``busy`` and ``resting`` so far."""
        return {
            "share": self.share,
            "applied": self.applied,
            "busy": round(self.busy, 6),
            "resting": round(self.rested, 6),
        }
