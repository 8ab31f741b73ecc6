"""The task state machine: every state a task of a join can be in on this
worker, and the only transitions between them.

::

                      assigned here
                           │
                           ▼
     ┌──────────────── RESTORING ──────────────────┐
     │      restored,      │ given up              │ not assigned
     │      opened         ▼                       ▼ any more
     │                  REVOKED ───────────────▶ CLOSED
     ▼                     ▲    next assignment    ▲
   RUNNING ── given up ────┘                       │
     │  ▲ ▲                                        │
     │  │ └──────── resumed / reopened ──┐         │
     │  │                                │         │
     │  │ restored      eager revoke     │         │
     │  │ again    ┌───────────────▶ PARKED ───────┤ not kept
     │  │          │                             │
     ├──┴──────────┘                             │
     │                                           │
     └── batch abandoned ──▶ ABANDONED ──────────┘ not assigned any more

* ``RESTORING``: assigned here, its state not restored yet (or not opened);
* ``RUNNING``: open, its logic applies records;
* ``PARKED``: stopped by a rebalance that revoked everything (eager, or the
  membership lost), state and indexes kept: it resumes if the next
  assignment keeps it and its database did not change meanwhile;
* ``REVOKED``: given up in a cooperative rebalance: no record is accepted for
  it, and the next assignment closes it;
* ``ABANDONED``: a batch of it could not be made durable (the lease ran out,
  or its changelog is no longer ours); it opens again only from state
  restored after that;
* ``CLOSED``: gone from this worker (not a stored state: the task is forgotten).

:data:`TRANSITIONS` is the whole graph; :func:`check` raises
:class:`~streamjoin.lifecycle.errors.InvalidTransition` for any other change.
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
