"""``module:attribute`` loading, the one implementation (``-A`` and ``--policy``).

The current directory is importable (as for ``faust -A``). An attribute that
is a zero-argument factory rather than the object itself is called when the
caller allows factories (``--policy streamjoin.ads.app:policy_from_env``).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from streamjoin.errors import StreamjoinError

__all__ = ["load_object"]


def load_object(
    spec: str,
    *,
    expected: type | tuple[type, ...],
    error: type[StreamjoinError],
    what: str,
    example: str,
    default_attr: str | None = None,
    factories: bool = False,
) -> Any:
    """Import ``module:attribute`` and return the object, which must be an *expected*.

    Args:
        spec: ``module:attribute`` (``module`` alone when *default_attr* is given).
        expected: the type(s) the object must have.
        error: the error class raised, e.g. ``AppImportError``.
        what: how the object is called in messages (``app``, ``policy``).
        example: a valid spec, shown in the message for a malformed one.
        default_attr: attribute used when *spec* names a module only.
        factories: call a callable attribute that is not an *expected* with no arguments.

    Raises:
        error: malformed spec, import failure, missing attribute or wrong type.
    """
    module_name, _, attr = spec.partition(":")
    attr = attr or (default_attr or "")
    if not module_name or not attr:
        raise error(f"{spec!r}: give the {what} as module:attribute, e.g. {example}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise error(
            f"cannot import {what} module {module_name!r}: {exc}; check the name and that "
            "the module is on PYTHONPATH (or in the current directory)"
        ) from exc
    except StreamjoinError:
        raise
    except Exception as exc:
        raise error(
            f"importing {what} module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        value = getattr(module, attr)
    except AttributeError as exc:
        raise error(
            f"module {module_name!r} has no attribute {attr!r}; "
            f"give {module_name}:<{what} variable>"
        ) from exc
    if factories and callable(value) and not isinstance(value, expected):
        value = value()
    if not isinstance(value, expected):
        names = expected if isinstance(expected, tuple) else (expected,)
        wanted = "/".join(f"{t.__module__.split('.')[0]}.{t.__qualname__}" for t in names)
        raise error(f"{module_name}:{attr} is a {type(value).__name__}, not a {wanted}")
    return value
