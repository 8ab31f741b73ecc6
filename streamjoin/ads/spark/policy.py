"""Finding the stream's attribution policy (``--policy module:attribute``)."""

from __future__ import annotations

from streamjoin.ads.errors import PolicyError
from streamjoin.ads.policy import AdAttribution
from streamjoin.worker.load import load_object

__all__ = ["DEFAULT_POLICY", "load_policy"]

#: the ad app's policy, built from the same ``ADS_*`` settings the workers read
DEFAULT_POLICY = "streamjoin.ads.app:policy_from_env"


def load_policy(spec: str = DEFAULT_POLICY) -> AdAttribution:
    """Import ``module:attribute`` and return the :class:`AdAttribution` it names.

    The attribute may also be a zero-argument function returning one. The
    current directory is importable (as for ``streamjoin worker -A``).

    Raises:
        PolicyError: bad spec, import failure, missing attribute or wrong type.
    """
    policy: AdAttribution = load_object(
        spec,
        expected=AdAttribution,
        error=PolicyError,
        what="policy",
        example=f"--policy {DEFAULT_POLICY}",
        factories=True,
    )
    return policy
