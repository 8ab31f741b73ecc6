"""faust's app settings read as stored, without faust counting the read as a use.

faust remembers every setting read from ``app.conf`` once the app is
configured and warns when one of them is changed afterwards. A worker that
compares a setting with its own value before it overrides it must not leave
that mark, so it reads the value where faust keeps it.

Private attributes it depends on (faust-streaming 0.15.3):

* ``Settings._<name>``: the stored value of setting ``<name>`` (faust's
  ``Param.storage_name``): ``_broker`` (the broker URLs), ``_web_port``, and
  those of the other settings ``streamjoin worker`` overrides. faust's
  ``Settings.__getattribute__`` records reads of public names only; they are
  read with ``object.__getattribute__``, past that hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from faust.types.settings import Settings

__all__ = ["stored_setting"]


def stored_setting(conf: Settings, name: str) -> Any:
    """The value of setting *name* as faust stores it in *conf* (its ``_<name>``);
    a name faust keeps no storage attribute for is read the ordinary way."""
    try:
        return object.__getattribute__(conf, f"_{name}")
    except AttributeError:
        return getattr(conf, name)
