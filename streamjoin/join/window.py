"""``JoinWindow``: which records of the two sides match, and when it is safe to decide.

Times are event times in milliseconds (a record's own ``ts_ms``). A task
decides against its **decision time**: the minimum of its inputs' watermarks
(:mod:`streamjoin.join.watermarks`). A record whose time + ``grace`` is below
the highest decision time reached is *late*: it could change something
already decided, so it is reported, never joined.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamjoin.join.errors import JoinConfigError

__all__ = ["JoinWindow"]


@dataclass(frozen=True)
class JoinWindow:
    """A right record matches a left one with the same key when
    ``left.ts - before <= right.ts <= left.ts + after``.

    ``grace`` bounds how far out of event-time order records may arrive.
    """

    before: int
    after: int
    grace: int

    def __post_init__(self) -> None:
        for name in ("before", "after", "grace"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise JoinConfigError(
                    f"JoinWindow.{name} must be a non-negative number of milliseconds, "
                    f"got {value!r}"
                )

    def matches(self, left_ts: int, right_ts: int) -> bool:
        """Whether a right record at ``right_ts`` falls in the window of a left one."""
        return left_ts - self.before <= right_ts <= left_ts + self.after

    @property
    def retention(self) -> int:
        """How long a record must be kept after its event time (window + grace)."""
        return self.before + self.after + self.grace

    @property
    def decision_delay(self) -> int:
        """How far decision time must pass a right record's time before its outcome is final.

        Every left record it can match has ``ts <= right_ts + before``; those
        arrive, at the latest, before decision time passes that plus ``grace``.
        """
        return self.before + self.grace

    def decided_after(self, right_ts: int) -> int:
        """Decision time after which a right record's outcome can no longer change."""
        return right_ts + self.decision_delay

    def is_decided(self, right_ts: int, decision_time: int | None) -> bool:
        """The "decided" rule, the one copy of it: decision time is strictly past
        :meth:`decided_after`. The stream emits an outcome exactly then; the
        archive settling, the Spark side and reconciliation select by it."""
        return decision_time is not None and decision_time > self.decided_after(right_ts)

    def is_late(self, ts: int, decided: int | None) -> bool:
        """The late rule: a record at ``ts`` could change something already decided,
        i.e. ``ts + grace`` is below *decided*, the highest decision time reached."""
        return decided is not None and ts + self.grace < decided
