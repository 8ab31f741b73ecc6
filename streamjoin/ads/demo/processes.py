"""The demo's processes: embedded broker, topics, workers, generator, Spark job.

:class:`DemoProcesses` starts and stops them, with the app settings they all
share (:class:`~streamjoin.ads.app.AdsSettings`) and their logs under
``out/logs``; it records start times in the run's
:class:`~streamjoin.ads.demo.state.DemoState`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys

from streamjoin.ads.app import AdsSettings
from streamjoin.ads.demo.options import DemoOptions
from streamjoin.ads.demo.state import DemoState, Worker, say
from streamjoin.ads.topics import AdTopics
from streamjoin.dev.broker import BrokerOptions, EmbeddedBroker, free_port
from streamjoin.dev.process import WorkerProcess
from streamjoin.errors import ConfigurationError

__all__ = ["APP", "RECONCILED", "TOPICS", "DemoProcesses"]

APP = "streamjoin.ads.app:app"
#: every topic the app reads or writes, created up front: a topic appearing
#: later changes the group's metadata and makes it rebalance again
TOPICS = AdTopics().all
RECONCILED = re.compile(r"reconciled: ([\d,]+) clicks, ([\d,]+) differences")


class DemoProcesses:
    """Starts and stops every process of the demo; ``out`` is ``options.out``."""

    def __init__(self, options: DemoOptions, state: DemoState) -> None:
        self.options = options
        self.out = options.out
        self.logs = self.out / "logs"
        self.archive = self.out / "archive"
        self.state = state
        self.workers: list[Worker] = []
        self.broker: EmbeddedBroker | None = None
        self.generator: subprocess.Popen[bytes] | None = None
        self.settings = AdsSettings(
            app_id=f"ads-demo-{options.seed}",
            partitions=options.partitions,
            grace_ms=options.grace_ms,
            archive_dir=str(self.archive),
        )

    def env(self) -> dict[str, str]:
        """The process environment of the workers and the Spark job (same settings)."""
        return {**os.environ, **self.settings.to_env()}

    def start_broker(self) -> None:
        """Start the embedded broker and create every topic of the app."""
        self.broker = EmbeddedBroker(
            BrokerOptions(port=0, quiet=False, log_path=self.logs / "broker.log")
        )
        self.broker.start()
        say(f"broker: embedded Kafka-protocol broker on {self.broker.bootstrap}")
        # before any worker asks for their metadata: the embedded broker would
        # create a missing topic with its own default partition count
        asyncio.run(_create_topics(self.broker.bootstrap, self.options.partitions))
        say(f"topics: {', '.join(TOPICS)} ({self.options.partitions} partitions each)")

    def start_worker(self, name: str) -> Worker:
        """Start worker ``name`` (one standby per task, web pages on a free port)."""
        broker = self.broker
        if broker is None:
            raise ConfigurationError("the broker is not running")
        port = free_port()
        process = WorkerProcess(
            APP,
            broker.url,
            self.out / "data" / name,
            self.logs / f"{name}.log",
            env=self.settings.to_env(),
            extra_args=(
                "--standby-replicas",
                "1",
                "--with-web",
                "--web-port",
                str(port),
                "--web-bind",
                "127.0.0.1",
                # identity comes from the data directory; no --instance-id: the
                # embedded broker's static membership makes such a group
                # rebalance over and over
            ),
        ).start()
        worker = Worker(name, process, port, started_at=self.state.now())
        self.workers.append(worker)
        self.state.events.append((self.state.now(), f"{name} started"))
        return worker

    def start_generator(self) -> None:
        """Start the seeded generator; it records every event to ``events.jsonl``."""
        if self.broker is None:
            raise ConfigurationError("the broker is not running")
        options = self.options
        span_s = int(options.duration * options.speed)
        argv = [
            sys.executable,
            "-m",
            "streamjoin.ads.generator",
            "--bootstrap",
            self.broker.bootstrap,
            "--seed",
            str(options.seed),
            "--rate",
            str(options.rate),
            "--duration",
            str(span_s),
            "--speed",
            str(options.speed),
            "--partitions",
            str(options.partitions),
            "--create-topics",
            "--record",
            str(self.out / "events.jsonl"),
            "--tail-ms",
            str(options.grace_ms + 60_000),
        ]
        log = open(self.logs / "generator.log", "ab")  # noqa: SIM115 - closed with the process
        self.generator = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._generator_log = log
        self.state.events.append((self.state.now(), "generator started"))

    def stop_everything(self) -> None:
        """Stop the workers, kill the generator's session, stop the broker."""
        for worker in self.workers:
            if worker.process.running():
                worker.process.stop(timeout=20)
        if self.generator is not None and self.generator.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.generator.pid, signal.SIGKILL)
            self.generator.wait(timeout=20)
        if self.broker is not None:
            self.broker.stop()
            self.broker = None

    def run_spark(self) -> tuple[str | None, int]:
        """Run ``streamjoin spark run`` on the archive; return its reconciliation
        line (None when it printed none) and its exit status."""
        say(
            f"[{self.state.now():6.1f}s] Spark ({self.options.spark_master}): batch join, "
            "campaign report, reconciliation"
        )
        argv = [
            sys.executable,
            "-m",
            "streamjoin",
            "spark",
            "run",
            "--archive",
            str(self.archive),
            "--out",
            str(self.out),
            "--spark-master",
            self.options.spark_master,
        ]
        with open(self.logs / "spark.log", "wb") as log:
            done = subprocess.run(
                argv, stdout=subprocess.PIPE, stderr=log, env=self.env(), timeout=900
            )
        output = done.stdout.decode(errors="replace")
        (self.out / "report").mkdir(exist_ok=True)
        (self.out / "report" / "spark-output.txt").write_text(output)
        sys.stdout.write(output)
        match = None
        for line in output.splitlines():
            if RECONCILED.search(line):
                match = line.strip()
        return match, done.returncode


async def _create_topics(bootstrap: str, partitions: int) -> None:
    """Create every topic of :data:`TOPICS` with ``partitions`` partitions."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, partitions, 1) for t in TOPICS])
    finally:
        await admin.close()
