"""Fixtures for broker tests: one embedded broker per session, started and stopped here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streamjoin.runtime.broker import BrokerOptions, EmbeddedBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A running embedded broker on a free loopback port (stopped by process group)."""
    log_path: Path = tmp_path_factory.mktemp("broker") / "tansu.log"
    embedded = EmbeddedBroker(BrokerOptions(port=0, quiet=False, log_path=log_path))
    embedded.start()
    try:
        yield embedded
    finally:
        embedded.stop()
