"""Errors of the archive."""

from __future__ import annotations

from streamjoin.errors import ConfigurationError, StreamjoinError

__all__ = ["ArchiveConfigError", "ArchiveError"]


class ArchiveError(StreamjoinError):
    """The archive cannot proceed."""


class ArchiveConfigError(ArchiveError, ConfigurationError):
    """An archive declaration or setting is invalid."""
