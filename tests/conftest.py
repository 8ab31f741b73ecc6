"""Fixtures every test directory shares: the real Prometheus binaries (tests/prometheus_bin.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_bin import prometheus_binary, promtool_binary


@pytest.fixture(scope="session")
def prometheus_bin() -> Path:
    """Debian's ``prometheus`` binary (installed by ``make prometheus``); errors if missing."""
    return prometheus_binary()


@pytest.fixture(scope="session")
def promtool_bin() -> Path:
    """Debian's ``promtool`` binary (installed by ``make prometheus``); errors if missing."""
    return promtool_binary()
