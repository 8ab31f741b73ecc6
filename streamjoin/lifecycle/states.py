"""The task state machine: every state a task of a join can be in on this
worker, and the only transitions between them.

The main paths::

    assigned ─▶ RESTORING ─▶ RUNNING ─▶ PARKED ─▶ RUNNING          eager rebalance, kept
                               │ └────▶ REVOKED ─▶ CLOSED          cooperative, given up
                               └──────▶ ABANDONED ─▶ RUNNING       restored again

* ``RESTORING``: assigned here, its state not restored (or not opened) yet;
* ``RUNNING``: open, its logic applies records;
* ``PARKED``: stopped by a rebalance that revokes everything (eager, or the
  membership lost), state and indexes kept: it resumes if the next
  assignment keeps it and its database did not change meanwhile;
* ``REVOKED``: given up in a cooperative rebalance: no record is accepted for
  it, and the next assignment closes it;
* ``ABANDONED``: a batch of it could not be made durable (the lease ran out,
  or its changelog is no longer ours); it opens again only from state
  restored after that;
* ``CLOSED``: gone from this worker (not stored: the task is forgotten).

Every transition (:data:`TRANSITIONS`; a test keeps this table equal to it):

=========== =========== ========================================================
from        to          when
=========== =========== ========================================================
RESTORING   RUNNING     its state is restored: opened (or at its first record)
RESTORING   REVOKED     given up in a cooperative rebalance before it opened
RESTORING   CLOSED      everything revoked, or not assigned any more
RUNNING     PARKED      a rebalance revokes everything
RUNNING     REVOKED     given up in a cooperative rebalance
RUNNING     ABANDONED   a batch of it may not be made durable
RUNNING     CLOSED      not assigned any more, or its owner token changed
PARKED      RUNNING     kept: resumed (reopened if its database changed)
PARKED      REVOKED     given up in a cooperative rebalance
PARKED      ABANDONED   the batch in flight at the revoke may not go on
PARKED      CLOSED      not kept by the next assignment
REVOKED     PARKED      the next assignment kept it after all
REVOKED     ABANDONED   the batch in flight at the revoke may not go on
REVOKED     CLOSED      the next assignment
ABANDONED   RUNNING     its state was restored after the abandon: reopened
ABANDONED   REVOKED     given up in a cooperative rebalance
ABANDONED   CLOSED      not assigned any more
=========== =========== ========================================================

:func:`check` raises :class:`~streamjoin.lifecycle.errors.InvalidTransition`
for any other change.
"""

from __future__ import annotations

import enum

from streamjoin.lifecycle.errors import InvalidTransition

__all__ = ["TRANSITIONS", "TaskState", "check"]


class TaskState(enum.Enum):
    """Where a task is in its life on this worker (see the module's diagram)."""

    RESTORING = "restoring"
    RUNNING = "running"
    PARKED = "parked"
    REVOKED = "revoked"
    ABANDONED = "abandoned"
    CLOSED = "closed"


_S = TaskState

#: state -> the states it may change to
TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    _S.RESTORING: frozenset({_S.RUNNING, _S.REVOKED, _S.CLOSED}),
    _S.RUNNING: frozenset({_S.PARKED, _S.REVOKED, _S.ABANDONED, _S.CLOSED}),
    _S.PARKED: frozenset({_S.RUNNING, _S.REVOKED, _S.ABANDONED, _S.CLOSED}),
    _S.REVOKED: frozenset({_S.PARKED, _S.ABANDONED, _S.CLOSED}),
    _S.ABANDONED: frozenset({_S.RUNNING, _S.REVOKED, _S.CLOSED}),
    _S.CLOSED: frozenset(),
}


def check(task: str, before: TaskState, after: TaskState) -> None:
    """Raise :class:`InvalidTransition` unless *before* may change to *after*."""
    if after not in TRANSITIONS[before]:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[before])) or "none"
        raise InvalidTransition(
            f"task {task} cannot go from {before.value} to {after.value} "
            f"(from {before.value} it may go to: {allowed}); this is a bug in "
            "streamjoin: please report it with the worker's log"
        )
