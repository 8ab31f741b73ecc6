"""Errors of the development helpers (embedded broker, process launcher)."""

from __future__ import annotations

from streamjoin.errors import StreamjoinError

__all__ = ["BrokerBinaryNotFound", "BrokerStartError", "DevError"]


class DevError(StreamjoinError):
    """Root of the development helpers' errors."""


class BrokerBinaryNotFound(DevError):
    """The embedded broker's binary is not installed."""


class BrokerStartError(DevError):
    """The embedded broker process did not start or did not open its port in time."""
