"""Errors raised by the runtime adapters (broker, worker, table restoration)."""

from __future__ import annotations

from streamjoin.errors import StreamjoinError

__all__ = [
    "AppImportError",
    "BrokerBinaryNotFound",
    "BrokerStartError",
    "BrokerUnreachable",
    "RuntimeComponentError",
]


class RuntimeComponentError(StreamjoinError):
    """Root of the runtime errors (embedded broker, worker, restoration)."""


class BrokerBinaryNotFound(RuntimeComponentError):
    """The embedded broker's binary is not installed."""


class BrokerStartError(RuntimeComponentError):
    """The embedded broker process did not start or did not open its port in time."""


class BrokerUnreachable(RuntimeComponentError):
    """No Kafka-protocol broker answers at the configured bootstrap address."""


class AppImportError(RuntimeComponentError):
    """The ``-A module:attribute`` given to the worker does not name an app."""
