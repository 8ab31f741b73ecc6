"""Module attributes resolved on first access (PEP 562), the one helper for it.

Packages that must not import their heavy parts (faust, pyarrow, PySpark) at
import time name them in a table; a module whose attribute is built from the
environment (``streamjoin.ads.app:app``) names a factory.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    module_name: str, table: Mapping[str, str | Callable[[], Any]]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving the names of *table*.

    A value is ``"module:attribute"`` (``"module"`` alone means the same
    attribute name in that module) or a zero-argument factory. The value is
    cached in the module, so each name is resolved once.
    """

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        if callable(target):
            value = target()
        else:
            source, _, attr = target.partition(":")
            value = getattr(importlib.import_module(source), attr or name)
        setattr(sys.modules[module_name], name, value)
        return value

    return __getattr__
