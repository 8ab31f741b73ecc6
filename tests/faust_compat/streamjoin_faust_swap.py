"""pytest plugin: make every faust app a test creates use streamjoin's classes.

Loaded into faust-streaming's own test suite by ``faust_compat_run.py``
(``-p streamjoin_faust_swap --streamjoin-swap=streamjoin``). It changes the
*defaults* of two faust settings, exactly what a user's
``faust.App(..., PartitionAssignor="streamjoin:PartitionAssignor",
TableManager="streamjoin:TableManager")`` does per app, so a test that passes
its own class still gets it. faust reads a setting's default from its
``Param.default`` at every ``Settings.__init__``
(``faust/types/settings/params.py``, ``Param.on_init_set_default``), and the
``Param`` objects are shared by ``Settings`` and its subclasses.

With ``--streamjoin-swap=faust`` (the baseline) it changes nothing else, so
both runs load the same plugins.

It also gives faust's ``tests/conftest.py`` the two private pytest helpers it
imports (``_pytest.assertion.util._compare_eq_dict`` / ``_compare_eq_set``,
gone from the pytest 9 that .venv keeps; faust pins ``pytest<8``). They only
format the message of faust's "left over tasks/threads/environment" errors.
"""

from __future__ import annotations

from typing import Any


def _compare_eq_set(left: Any, right: Any, verbose: int = 0, **_: Any) -> list[str]:
    return [
        *(f"Extra items in the left set: {item!r}" for item in set(left) - set(right)),
        *(f"Extra items in the right set: {item!r}" for item in set(right) - set(left)),
    ]


def _compare_eq_dict(left: Any, right: Any, verbose: int = 0, **_: Any) -> list[str]:
    keys = set(left) | set(right)
    return [
        f"{key!r}: {left.get(key, '<missing>')!r} != {right.get(key, '<missing>')!r}"
        for key in sorted(keys, key=repr)
        if left.get(key, _MISSING) != right.get(key, _MISSING)
    ]


_MISSING = object()


def _install_pytest_shims() -> None:
    from _pytest.assertion import util

    for helper in (_compare_eq_set, _compare_eq_dict):
        if not hasattr(util, helper.__name__):
            setattr(util, helper.__name__, helper)


_install_pytest_shims()

SWAPPED = {
    "PartitionAssignor": "streamjoin:PartitionAssignor",
    "TableManager": "streamjoin:TableManager",
}


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--streamjoin-swap",
        choices=("faust", "streamjoin"),
        default="faust",
        help="faust: faust's own assignor and table manager (baseline); "
        "streamjoin: streamjoin:PartitionAssignor and streamjoin:TableManager",
    )


def pytest_configure(config: Any) -> None:
    if config.getoption("streamjoin_swap") != "streamjoin":
        return
    from faust.types.settings.settings import Settings

    for name, path in SWAPPED.items():
        param = Settings.SETTINGS[name]
        param.default = path
        param.set_class_default(Settings)


def pytest_report_header(config: Any) -> str:
    from faust.types.settings.settings import Settings

    conf = Settings("streamjoin-faust-compat-probe")
    classes = {name: getattr(conf, name) for name in SWAPPED}
    return "streamjoin-swap={}: {}".format(
        config.getoption("streamjoin_swap"),
        ", ".join(f"{name}={cls.__module__}.{cls.__qualname__}" for name, cls in classes.items()),
    )
