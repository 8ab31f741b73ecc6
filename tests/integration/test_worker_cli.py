"""``streamjoin worker`` fails with one clear line, not a traceback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from streamjoin.dev.broker import EmbeddedBroker, free_port

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


def _clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without STREAMJOIN_* variables, plus *extra*."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMJOIN_")}
    env.update(extra)
    return env


def test_worker_is_configured_by_environment_variables_alone(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    result = subprocess.run(
        [sys.executable, "-c", CLI, "worker"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=APPS_DIR,
        start_new_session=True,
        env=_clean_env(
            STREAMJOIN_APP="apps.counter:app",
            STREAMJOIN_BROKER=f"kafka://127.0.0.1:{port}",
            STREAMJOIN_DATADIR=str(tmp_path),
            STREAMJOIN_BROKER_TIMEOUT="1",
        ),
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert f"no Kafka broker answers at 127.0.0.1:{port} (waited 1s)" in result.stderr


def test_contradicting_security_settings_are_one_line_and_nonzero(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CLI, "worker", "-A", "apps.counter:app",
         "--datadir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=APPS_DIR,
        start_new_session=True,
        env=_clean_env(STREAMJOIN_SECURITY_PROTOCOL="SASL_SSL", STREAMJOIN_SASL_USERNAME="bob"),
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "Error: --security-protocol SASL_SSL with --sasl-mechanism PLAIN needs the password "
        "in the environment variable STREAMJOIN_SASL_PASSWORD (there is no flag)"
    ]


def _listening(port: int) -> set[str]:
    """Local IPv4 addresses with a listening TCP socket on *port* (from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, hex_port = fields[1].split(":")
        if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
            octets = [str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)]
            found.add(".".join(octets))
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net/tcp")
def test_web_server_binds_loopback_unless_told_otherwise(workers: Any) -> None:
    import json
    import urllib.request

    started = time.time()
    default_port, all_port = free_port(), free_port()
    workers.spawn("a", extra_args=("--with-web", "--web-port", str(default_port)))
    workers.spawn(
        "b",
        env={"STREAMJOIN_WEB_BIND": "0.0.0.0", "STREAMJOIN_WEB_PORT": str(all_port)},
        extra_args=("--with-web",),
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if _listening(default_port) and _listening(all_port):
            break
        time.sleep(0.2)
    assert _listening(default_port) == {"127.0.0.1"}
    assert _listening(all_port) == {"0.0.0.0"}
    url = f"http://127.0.0.1:{default_port}/streamjoin/assignment/"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
    # once assigned, the page lists the worker's rebalances: first JoinGroup to
    # assignment, wall clock
    rebalances: list[list[float]] = []
    while time.monotonic() < deadline + 60 and not rebalances:
        with urllib.request.urlopen(url, timeout=10) as response:
            rebalances = json.loads(response.read())["rebalances"]
        time.sleep(0.2)
    assert rebalances, "no rebalance listed on the assignment page"
    with urllib.request.urlopen(url, timeout=10) as response:
        page = json.loads(response.read())
    assert page["rack"] is None  # neither worker set one
    # a leader shows the stats of the assignment it made, cross-rack figures included
    if page["led"]:
        assert page["led"]["cross_rack_tasks"] == 0
    for began, ended in rebalances:
        assert started <= began <= ended <= time.time(), rebalances


def test_sigquit_dumps_every_thread_and_the_worker_runs_on(workers: Any) -> None:
    """``kill -QUIT`` is how an operator (and a test that had to kill a hung
    worker) sees where a worker is stuck: every thread's stack in its log,
    the worker still running and still stoppable."""
    worker = workers.spawn("a")
    worker.wait_for_log(r"Worker\]: Ready", timeout=90)
    pid = worker.pid
    assert pid is not None
    os.kill(pid, signal.SIGQUIT)
    worker.wait_for_log(r"^Thread 0x|^Current thread 0x", timeout=20)
    worker.wait_for_log(r'File ".*runner\.py", line \d+ in run_app', timeout=20)
    # then the tasks of every event loop: the main one and the consumer thread's
    # (the dump is written while this reads the log: wait for each part)
    worker.wait_for_log(r"--- asyncio tasks of \d+ open event loop", timeout=20)
    loops = worker.wait_for_log(r"loop 0x[0-9a-f]+ \(running: True\): \d+ task", 20, count=2)
    assert all(int(re.findall(r"(\d+) task", line)[0]) > 0 for line in loops), loops
    # each task's whole await chain: the consumer thread's fetcher waits in aiokafka
    worker.wait_for_log(r"_fetch_requests_routine", timeout=20)
    time.sleep(1.0)
    assert worker.running()
    assert worker.stop(timeout=60) == 0
