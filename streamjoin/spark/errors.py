"""Errors of the Spark batch side."""

from __future__ import annotations

from streamjoin.errors import ConfigurationError, StreamjoinError

__all__ = ["ArchiveError", "BatchError", "PolicyError", "describe"]


class BatchError(StreamjoinError):
    """The batch job cannot produce a result."""


class ArchiveError(BatchError):
    """The archive is missing, unreadable, or does not follow the archive contract."""


class PolicyError(BatchError, ConfigurationError):
    """``--policy`` does not name an :class:`~streamjoin.join.ads.AdAttribution`."""


def describe(exc: BaseException) -> str:
    """One line saying why a Spark call failed (the root Java cause when there is one)."""
    java = getattr(exc, "java_exception", None)  # py4j's Py4JJavaError
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None and cause.getCause() != cause:
                cause = cause.getCause()
            text = str(cause.toString())
        except Exception:  # the gateway may be gone
            text = str(exc)
    else:
        text = str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
