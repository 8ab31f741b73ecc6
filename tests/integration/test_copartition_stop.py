"""Co-partitioned topics with different partition counts stop a worker with one message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_util import create_topic, run, wait_until

from streamjoin.dev.broker import EmbeddedBroker, free_port
from streamjoin.dev.process import WorkerProcess

APPS_DIR = Path(__file__).resolve().parent  # apps/ lives beside the tests

pytestmark = pytest.mark.broker


def _topics(broker: EmbeddedBroker, app_id: str) -> None:
    run(create_topic(broker.bootstrap, f"{app_id}-orders", 4))
    run(create_topic(broker.bootstrap, f"{app_id}-payments", 2))


def test_streamjoin_worker_refuses_to_start(broker: EmbeddedBroker, tmp_path: Path) -> None:
    app_id = "sj-copart-start"
    _topics(broker, app_id)
    worker = WorkerProcess(
        "apps.copart_table:app",
        broker.url,
        tmp_path / "w",
        tmp_path / "w.log",
        env={"SJ_TEST_APP_ID": app_id},
        cwd=APPS_DIR,
    ).start()
    try:
        wait_until(lambda: worker.returncode() is not None, 60, "the worker to exit")
    finally:
        worker.kill()
    text = worker.log_text()
    assert worker.returncode() == 1, text
    assert f"'{app_id}-orders' has 4" in text and f"'{app_id}-payments' has 2" in text
    assert "Traceback" not in text


def test_a_plain_faust_worker_is_stopped_by_the_leader(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Without the start-up check (faust's own CLI), the group leader finds the
    mismatch while assigning and stops the worker instead of retrying forever."""
    app_id = "sj-copart-leader"
    _topics(broker, app_id)
    env = dict(
        os.environ,
        SJ_TEST_APP_ID=app_id,
        PYTHONPATH=str(APPS_DIR),
        BROKER_URL=broker.url,
        WEB_PORT=str(free_port()),
    )
    log_path = tmp_path / "faust.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "faust",
                "-A",
                "apps.copart_table:app",
                "--datadir",
                str(tmp_path / "data"),
                "worker",
                "--without-web",
                "--loglevel",
                "info",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=APPS_DIR,
            start_new_session=True,
        )
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait(timeout=20)
        pytest.fail("the worker kept running: " + log_path.read_text()[-2000:])
    text = log_path.read_text()
    assert process.returncode != 0, text[-2000:]
    assert "cannot assign the group, stopping this worker" in text
    assert f"{app_id}-payments" in text
