"""Errors of the task lifecycle."""

from __future__ import annotations

from streamjoin.errors import StreamjoinError

__all__ = ["InvalidTransition"]


class InvalidTransition(StreamjoinError):
    """A task was asked to change state along an edge the state machine does not have.

    This is a bug in streamjoin, not a user error: the message names the task
    and both states; please report it with the worker's log.
    """
