"""``streamjoin worker`` fails with one clear line, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamjoin.runtime.broker import EmbeddedBroker, free_port

pytestmark = pytest.mark.broker

APPS_DIR = Path(__file__).resolve().parent
CLI = "from streamjoin.cli import main; main()"


def run_worker(*args: str, cwd: Path = APPS_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, "worker", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        start_new_session=True,
    )


def test_unreachable_broker_is_one_line_and_nonzero(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    result = run_worker(
        "-A", "apps.counter:app", "--broker", f"kafka://127.0.0.1:{port}",
        "--datadir", str(tmp_path), "--broker-timeout", "1",
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert f"no Kafka broker answers at 127.0.0.1:{port}" in result.stderr
    assert "streamjoin broker" in result.stderr


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("apps.nosuchmodule:app", "cannot import app module 'apps.nosuchmodule'"),
        ("apps.counter:nosuchapp", "has no attribute 'nosuchapp'"),
        ("apps.counter:PARTITIONS", "not a faust.App"),
    ],
)
def test_bad_app_is_one_line_and_nonzero(
    broker: EmbeddedBroker, tmp_path: Path, spec: str, expected: str
) -> None:
    result = run_worker("-A", spec, "--broker", broker.url, "--datadir", str(tmp_path))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
