"""Errors of the worker entry point (options, app loading)."""

from __future__ import annotations

from streamjoin.errors import BrokerUnreachable, ConfigurationError, StreamjoinError

__all__ = ["AppImportError", "BrokerUnreachable", "WorkerError", "WorkerSettingsError"]


class WorkerError(StreamjoinError):
    """Root of the worker's errors."""


class AppImportError(WorkerError):
    """The ``-A module:attribute`` given to the worker does not name an app."""


class WorkerSettingsError(WorkerError, ConfigurationError):
    """Worker settings contradict each other or name unusable files."""
