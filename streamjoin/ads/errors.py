"""Errors of the ad-monetization vertical (app settings, archive, Spark side)."""

from __future__ import annotations

from streamjoin.errors import ConfigurationError, StreamjoinError

__all__ = [
    "AdsConfigError",
    "AdsError",
    "ArchiveConfigError",
    "ArchiveError",
    "BatchError",
    "PolicyError",
]


class AdsError(StreamjoinError):
    """Root of the ad-monetization vertical's errors."""


class AdsConfigError(AdsError, ConfigurationError):
    """An ``ADS_*`` setting is malformed."""


class ArchiveError(AdsError):
    """The archive cannot be written or read, or does not follow the archive contract."""


class ArchiveConfigError(ArchiveError, ConfigurationError):
    """An archive declaration or setting is invalid."""


class BatchError(AdsError):
    """The batch job (Spark side) cannot produce a result."""


class PolicyError(BatchError, ConfigurationError):
    """``--policy`` does not name an :class:`~streamjoin.ads.policy.AdAttribution`."""
