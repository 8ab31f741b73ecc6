"""The root of every error streamjoin raises on purpose.

Each subsystem defines its specific errors in its own ``errors`` module, all
derived from :class:`StreamjoinError`, so a caller can catch everything
streamjoin-specific with one ``except`` clause.
"""

from __future__ import annotations

__all__ = ["BrokerUnreachable", "ConfigurationError", "StreamjoinError"]


class StreamjoinError(Exception):
    """Root of all streamjoin errors.

    Messages say what went wrong *and* what the user can do about it.
    """


class ConfigurationError(StreamjoinError):
    """A setting, flag or input document is invalid."""


class BrokerUnreachable(StreamjoinError):
    """No Kafka broker answers at the configured address, or it refuses our credentials."""
