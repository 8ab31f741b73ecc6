"""``streamjoin topics check`` against the embedded broker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_util import create_topic, run

from streamjoin.dev.broker import EmbeddedBroker

pytestmark = [pytest.mark.broker]

APPS = Path(__file__).resolve().parent


def _check(broker: EmbeddedBroker, app_id: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SJ_TEST_APP_ID=app_id, PYTHONPATH=str(APPS))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "streamjoin",
            "topics",
            "check",
            "-A",
            "apps.copart:app",
            "--broker",
            broker.url,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=APPS,
        timeout=120,
        check=False,
    )


def test_matching_counts_pass(broker: EmbeddedBroker) -> None:
    run(create_topic(broker.bootstrap, "sjt-ok-impressions", 4))
    run(create_topic(broker.bootstrap, "sjt-ok-clicks", 4))
    result = _check(broker, "sjt-ok")
    assert result.returncode == 0, result.stderr
    assert "ok: partition counts fit the app" in result.stdout


def test_differing_counts_fail_naming_both_topics_and_the_fix(broker: EmbeddedBroker) -> None:
    run(create_topic(broker.bootstrap, "sjt-bad-impressions", 4))
    run(create_topic(broker.bootstrap, "sjt-bad-clicks", 6))
    result = _check(broker, "sjt-bad")
    assert result.returncode == 1
    assert (
        "'sjt-bad-clicks' has 6" in result.stderr and "'sjt-bad-impressions' has 4" in result.stderr
    )
    assert "same number of partitions" in result.stderr
    assert "Traceback" not in result.stderr
