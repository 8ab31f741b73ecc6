"""streamjoin: stateful stream-stream joins for Faust-style Python apps.

The faust-facing names (``App``, ``PartitionAssignor``, ``TableManager``) are
resolved lazily so that importing the pure layers (``streamjoin.assignment``)
never pulls in faust, aiokafka or an event loop.
"""

from __future__ import annotations

import importlib
from typing import Any

from streamjoin.errors import ConfigurationError, StreamjoinError

__version__ = "0.1.0"

# public name -> "module:attribute", imported on first access
_LAZY: dict[str, str] = {
    "App": "streamjoin.app:App",
    "PartitionAssignor": "streamjoin.adapter.partition_assignor:PartitionAssignor",
    "TableManager": "streamjoin.runtime.tables:TableManager",
}

__all__ = ["ConfigurationError", "StreamjoinError", "__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'streamjoin' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
