"""Fixtures for broker tests: one embedded broker per session, started and stopped here."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamjoin.dev.broker import BrokerOptions, EmbeddedBroker
from streamjoin.dev.process import WorkerProcess


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


APPS_DIR = Path(__file__).resolve().parent


class Workers:
    """Starts test-app workers and guarantees they are killed at teardown."""

    def __init__(self, broker: EmbeddedBroker, tmp_path: Path, app_id: str) -> None:
        self.broker = broker
        self.tmp_path = tmp_path
        self.app_id = app_id
        self.started: list[WorkerProcess] = []

    def spawn(
        self,
        name: str,
        *,
        env: dict[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
        partitions: int = 4,
        app: str = "apps.counter:app",
    ) -> WorkerProcess:
        """Start worker *name* of test app *app* (under ``apps/``); its data
        directory and log are ``tmp_path/name``."""
        full_env = {"SJ_TEST_APP_ID": self.app_id, "SJ_TEST_PARTITIONS": str(partitions)}
        full_env.update(env or {})
        worker = WorkerProcess(
            app,
            self.broker.url,
            self.tmp_path / name,
            self.tmp_path / f"{name}.log",
            env=full_env,
            extra_args=extra_args,
            cwd=APPS_DIR,
        )
        self.started.append(worker)
        return worker.start()

    def kill_all(self) -> None:
        """SIGKILL every worker still running (by process group)."""
        for worker in self.started:
            worker.kill()


@pytest.fixture
def workers(
    broker: EmbeddedBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Workers]:
    """Worker factory bound to a per-test app id; kills its workers even when the test fails."""
    name = request.node.name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    app_id = "sj-" + re.sub(r"[^a-z0-9]+", "-", name.lower())[:32] + "-" + digest
    pool = Workers(broker, tmp_path, app_id)
    try:
        yield pool
    finally:
        pool.kill_all()
