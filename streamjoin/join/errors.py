"""Errors of the join layer."""

from __future__ import annotations

from streamjoin.errors import ConfigurationError, StreamjoinError

__all__ = ["JoinConfigError", "JoinError"]


class JoinError(StreamjoinError):
    """A join cannot proceed."""


class JoinConfigError(JoinError, ConfigurationError):
    """A join window or join declaration is invalid."""
