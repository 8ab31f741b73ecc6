"""Errors of the join layer."""

from __future__ import annotations

from streamjoin.errors import ConfigurationError, StreamjoinError

__all__ = ["JoinConfigError", "JoinCopartitionError", "JoinError"]


class JoinError(StreamjoinError):
    """A join cannot proceed."""


class JoinConfigError(JoinError, ConfigurationError):
    """A join window or join declaration is invalid."""


class JoinCopartitionError(JoinConfigError):
    """The two topics of a join have different partition counts on the broker."""
