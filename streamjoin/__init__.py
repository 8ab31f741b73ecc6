"""streamjoin: stateful stream-stream joins for Faust-style Python apps.

The faust-facing names (``App``, ``PartitionAssignor``, ``TableManager``) are
resolved lazily so that importing the pure layers (``streamjoin.assignment``)
never pulls in faust, aiokafka or an event loop.
"""

from __future__ import annotations

from streamjoin._lazy import lazy_attributes
from streamjoin.errors import ConfigurationError, StreamjoinError

__version__ = "0.1.0"

# public name -> "module:attribute", imported on first access
_LAZY: dict[str, str] = {
    "App": "streamjoin.faust.app:App",
    "PartitionAssignor": "streamjoin.faust.assignment.assignor:PartitionAssignor",
    "TableManager": "streamjoin.faust.restore.tables:TableManager",
}

__all__ = ["ConfigurationError", "StreamjoinError", "__version__", *sorted(_LAZY)]


__getattr__ = lazy_attributes(__name__, _LAZY)
