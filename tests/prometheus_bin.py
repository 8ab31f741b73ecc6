"""Where the tests find a real Prometheus and promtool.

``tests/install-prometheus.sh`` unpacks Debian's ``prometheus`` package (2.42 on
Debian 12) into ``<venv>/prometheus`` (``$STREAMJOIN_PROMETHEUS_DIR`` when set);
``make test`` runs it first (``make prometheus`` alone). A test that needs a
binary calls :func:`prometheus_binary` or :func:`promtool_binary` (or takes the
``prometheus_bin`` / ``promtool_bin`` fixtures of ``tests/conftest.py``): when
the binary is missing the test fails, naming the command that installs it. It is
never skipped.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

__all__ = [
    "INSTALL_SCRIPT",
    "install_command",
    "prometheus_binary",
    "prometheus_dir",
    "promtool_binary",
]

ROOT = Path(__file__).resolve().parents[1]
INSTALL_SCRIPT = ROOT / "tests" / "install-prometheus.sh"
#: overrides where the package is unpacked (default: ``<venv>/prometheus``)
DIR_VARIABLE = "STREAMJOIN_PROMETHEUS_DIR"


def prometheus_dir() -> Path:
    """The directory Debian's package is unpacked into."""
    configured = os.environ.get(DIR_VARIABLE)
    return Path(configured) if configured else Path(sys.prefix) / "prometheus"


def install_command() -> str:
    """The command that installs the binaries where :func:`prometheus_dir` looks."""
    if os.environ.get(DIR_VARIABLE):
        return f"bash {INSTALL_SCRIPT.relative_to(ROOT)} {prometheus_dir()}"
    return f"make prometheus (or: bash {INSTALL_SCRIPT.relative_to(ROOT)} {prometheus_dir()})"


def _binary(name: str) -> Path:
    path = prometheus_dir() / "usr" / "bin" / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"{name} is not installed at {path}: this test runs the real one "
            f"(Debian's prometheus package). Install it with: {install_command()}",
            pytrace=False,
        )
    return path


def prometheus_binary() -> Path:
    """The ``prometheus`` server binary; fails the calling test when it is missing."""
    return _binary("prometheus")


def promtool_binary() -> Path:
    """The ``promtool`` binary; fails the calling test when it is missing."""
    return _binary("promtool")
