"""Finding the stream's attribution policy (``--policy module:attribute``)."""

from __future__ import annotations

import importlib
import os
import sys

from streamjoin.join.ads import AdAttribution
from streamjoin.spark.errors import PolicyError

__all__ = ["DEFAULT_POLICY", "load_policy"]

#: the example app's policy: the object its join runs with
DEFAULT_POLICY = "examples.ad_monetization.app:POLICY"


def load_policy(spec: str = DEFAULT_POLICY) -> AdAttribution:
    """Import ``module:attribute`` and return it; it must be an :class:`AdAttribution`.

    The current directory is importable (as for ``streamjoin worker -A``), so
    the default works from the repository root.

    Raises:
        PolicyError: bad spec, import failure, missing attribute or wrong type.
    """
    module_name, sep, attr = spec.partition(":")
    if not module_name or not sep or not attr:
        raise PolicyError(
            f"--policy {spec!r}: give the policy as module:attribute, e.g. {DEFAULT_POLICY}"
        )
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise PolicyError(
            f"--policy {spec!r}: cannot import {module_name!r} ({exc}); run from the "
            "directory that holds it or put it on PYTHONPATH"
        ) from None
    except Exception as exc:
        raise PolicyError(
            f"--policy {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    try:
        policy = getattr(module, attr)
    except AttributeError:
        raise PolicyError(f"--policy {spec!r}: {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(policy, AdAttribution):
        raise PolicyError(
            f"--policy {spec!r} is a {type(policy).__name__}, not an AdAttribution "
            "(streamjoin.join.ads.AdAttribution, the object the stream's join runs with)"
        )
    return policy
