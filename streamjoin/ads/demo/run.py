"""``streamjoin demo``: the ad-monetization pipeline end to end on one machine.

Starts the embedded broker, creates the topics, runs the seeded generator and
three workers of ``streamjoin.ads.app`` (one standby each, archiving
to Parquet), adds a fourth worker and ``kill -9``\\s one of the first three
midway, waits until every event is joined and archived, stops the workers,
runs the Spark job (campaign report and reconciliation of the stream's
outcomes against the batch join) and writes an HTML report with charts.

Everything goes under ``--out``: ``archive/`` (Parquet), ``report/``
(``index.html``, PNG charts, the Spark report), ``reconciliation/``,
``logs/`` (broker, generator, workers, Spark) and ``events.jsonl`` (every
produced record, as the generator's ``--record`` writes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from streamjoin.ads.app import AdsSettings
from streamjoin.ads.demo.timeline import Sample
from streamjoin.ads.topics import AdTopics
from streamjoin.dev.broker import BrokerOptions, EmbeddedBroker, free_port
from streamjoin.dev.process import WorkerProcess
from streamjoin.errors import ConfigurationError
from streamjoin.join.window import JoinWindow

__all__ = ["DemoOptions", "run_demo"]

APP = "streamjoin.ads.app:app"
INPUT_TOPIC = "impressions"
#: every topic the app reads or writes, created up front: a topic appearing
#: later changes the group's metadata and makes it rebalance again
TOPICS = AdTopics().all
RECONCILED = re.compile(r"reconciled: ([\d,]+) clicks, ([\d,]+) differences")
RESTORING = re.compile(r"restoring table (\S+): ([\d,]+)/([\d,]+) records")


@dataclass(frozen=True)
class DemoOptions:
    """What the demo runs.

    Attributes:
        out: output directory (created; must be empty or not exist unless ``force``).
        seed: seeds the generator: the same seed produces the same events.
        duration: seconds of generation (wall clock); the whole run takes about
            this plus worker start-up, settling and Spark (~1 minute more).
        speed: event-time milliseconds per wall-clock millisecond (60: an hour
            of events in a minute).
        rate: impressions per second of event time.
        partitions: partitions of the two input topics (= tasks).
        spark_master: Spark master URL for the batch job.
        force: replace the contents of an existing ``out``.
        grace_ms: the join's grace in event time. At ``speed`` 60 one minute of
            event time passes in one wall-clock second; the grace must cover
            how far the two topics' fetches can drift apart on a busy machine.
    """

    out: Path
    seed: int = 7
    duration: float = 60.0
    speed: float = 60.0
    rate: float = 12.0
    partitions: int = 6
    spark_master: str = "local[*]"
    force: bool = False
    grace_ms: int = 60_000

    def __post_init__(self) -> None:
        if self.duration < 20:
            raise ConfigurationError(
                "--duration must be at least 20 s (a worker joins and one is killed), "
                f"got {self.duration}"
            )
        if self.speed <= 0 or self.rate <= 0 or self.partitions < 2:
            raise ConfigurationError("--speed and --rate must be positive and --partitions >= 2")


@dataclass
class _Worker:
    name: str
    process: WorkerProcess
    web_port: int
    killed_at: float | None = None
    started_at: float = 0.0


@dataclass
class _State:
    started: float = field(default_factory=time.monotonic)
    samples: list[Sample] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)

    def now(self) -> float:
        return round(time.monotonic() - self.started, 1)


def _say(line: str, stream: TextIO = sys.stdout) -> None:
    print(line, file=stream, flush=True)


def _get_json(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return json.loads(response.read())


class _Demo:
    def __init__(self, options: DemoOptions) -> None:
        self.options = options
        self.out = options.out
        self.logs = self.out / "logs"
        self.archive = self.out / "archive"
        self.state = _State()
        self.workers: list[_Worker] = []
        self.broker: EmbeddedBroker | None = None
        self.generator: subprocess.Popen[bytes] | None = None
        self.settings = AdsSettings(
            app_id=f"ads-demo-{options.seed}",
            partitions=options.partitions,
            grace_ms=options.grace_ms,
            archive_dir=str(self.archive),
        )

    # -- lifecycle ------------------------------------------------------------------

    def prepare(self) -> None:
        out = self.out
        if out.exists() and any(out.iterdir()):
            if not self.options.force:
                raise ConfigurationError(
                    f"{out} is not empty; pass --force to replace it or choose another --out"
                )
            shutil.rmtree(out)
        self.logs.mkdir(parents=True)
        self.archive.mkdir()

    def env(self) -> dict[str, str]:
        """The process environment of the workers and the Spark job (same settings)."""
        return {**os.environ, **self.settings.to_env()}

    def start_broker(self) -> None:
        self.broker = EmbeddedBroker(
            BrokerOptions(
                port=0, quiet=False, log_path=self.logs / "broker.log", die_with_parent=True
            )
        )
        self.broker.start()
        _say(f"broker: embedded Kafka-protocol broker on {self.broker.bootstrap}")
        # before any worker asks for their metadata: the embedded broker would
        # create a missing topic with its own default partition count
        asyncio.run(_create_topics(self.broker.bootstrap, self.options.partitions))
        _say(f"topics: {', '.join(TOPICS)} ({self.options.partitions} partitions each)")

    def start_worker(self, name: str) -> _Worker:
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
        worker = _Worker(name, process, port, started_at=self.state.now())
        self.workers.append(worker)
        self.state.events.append((self.state.now(), f"{name} started"))
        return worker

    def start_generator(self) -> None:
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

    # -- watching ---------------------------------------------------------------------

    def sample(self) -> None:
        t = self.state.now()
        for worker in self.workers:
            if not worker.process.running():
                continue
            try:
                assignment = _get_json(worker.web_port, "/streamjoin/assignment/")
                joins = _get_json(worker.web_port, "/streamjoin/joins/")
            except (OSError, ValueError):
                continue
            tasks = tuple(sorted(assignment.get("actives", {}).get(INPUT_TOPIC, [])))
            self.state.samples.append(Sample(t, worker.name, tasks))
            billing = joins.get("billing", {})
            standby = assignment.get("standbys", {})
            self.state.stats[worker.name] = {
                "tasks": tasks,
                "standbys": tuple(sorted({p for ps in standby.values() for p in ps})),
                "stats": billing.get("stats", {}),
                "buffered": sum(t.get("buffered", 0) for t in billing.get("tasks", {}).values()),
            }

    def live_view(self) -> None:
        rows = []
        for worker in self.workers:
            info = self.state.stats.get(worker.name, {})
            stats = info.get("stats", {})
            status = (
                "killed"
                if worker.killed_at is not None
                else ("running" if worker.process.running() else "stopped")
            )
            restore = _restore_progress(worker.process.log_text(since_start=False))
            rows.append(
                f"  {worker.name:<4} {status:<8} tasks {list(info.get('tasks', ()))!s:<14} "
                f"standbys {list(info.get('standbys', ()))!s:<14} "
                f"processed {stats.get('processed', 0):>8,} buffered {info.get('buffered', 0):>5,}"
                f"{'  ' + restore if restore else ''}"
            )
        gen = "running" if self.generator is not None and self.generator.poll() is None else "done"
        _say(f"[{self.state.now():6.1f}s] generator {gen}")
        for row in rows:
            _say(row)

    # -- the run ----------------------------------------------------------------------

    def run(self) -> int:
        options = self.options
        self.prepare()
        _say(
            f"demo: seed {options.seed}, {options.duration:.0f} s of events at {options.speed:g}x "
            f"event time, {options.partitions} tasks, output in {self.out}"
        )
        try:
            self.start_broker()
            for name in ("w1", "w2", "w3"):
                self.start_worker(name)
            for worker in self.workers:
                worker.process.wait_for_log(r"Worker\]: Ready", timeout=120)
            _say("workers: w1 w2 w3 ready (1 standby per task)")
            self.start_generator()
            begin = time.monotonic()
            added = killed = False
            last_view = 0.0
            while True:
                elapsed = time.monotonic() - begin
                if not added and elapsed >= options.duration / 3:
                    self.start_worker("w4")
                    _say(f"[{self.state.now():6.1f}s] w4 joins the group")
                    added = True
                if not killed and elapsed >= options.duration / 2:
                    victim = self.workers[1]
                    victim.process.kill()
                    victim.killed_at = self.state.now()
                    self.state.events.append((victim.killed_at, f"{victim.name} killed (-9)"))
                    _say(f"[{self.state.now():6.1f}s] kill -9 {victim.name}")
                    killed = True
                self.sample()
                if time.monotonic() - last_view >= 3:
                    self.live_view()
                    last_view = time.monotonic()
                if self.generator is not None and self.generator.poll() is not None:
                    break
                if elapsed > options.duration * 3 + 120:
                    raise ConfigurationError(
                        "the generator did not finish in time; see logs/generator.log"
                    )
                time.sleep(1)
            if self.generator is not None and self.generator.returncode != 0:
                raise ConfigurationError("the generator failed; see logs/generator.log")
            self.state.events.append((self.state.now(), "generator done"))
            _say(f"[{self.state.now():6.1f}s] generator done; waiting for the join and archive")
            self.settle()
            end = self.state.now()
            self.stop_everything()
            _say(f"[{self.state.now():6.1f}s] workers and broker stopped")
            verdict, spark_code = self.spark()
            from streamjoin.ads.demo.report import write_report

            report = write_report(
                self.out,
                samples=self.state.samples,
                events=self.state.events,
                end=end,
                verdict=verdict,
                options=options,
            )
            _say(f"report: {report}")
            _say(verdict or "reconciliation: no verdict (see logs/spark.log)")
            return spark_code
        finally:
            self.stop_everything()

    def settle(self, timeout: float = 240.0) -> None:
        """Wait until every input is archived and every decidable click has its
        outcome in the archive (computed from the generator's record file)."""
        rows = _read_jsonl(self.out / "events.jsonl")
        inputs = sum(1 for r in rows if r.get("malformed") is None)
        expected = _decidable_clicks(rows, self.settings.policy.window)
        deadline = time.monotonic() + timeout
        last_view = 0.0
        progress: tuple[int, int] | None = None
        progress_at = time.monotonic()
        while time.monotonic() < deadline:
            self.sample()
            archived = _archived_inputs(self.archive)
            outcomes = _archived_outcomes(self.archive)
            if (archived, len(outcomes)) != progress:
                progress, progress_at = (archived, len(outcomes)), time.monotonic()
            elif archived >= inputs and time.monotonic() - progress_at > 30:
                missing = len(expected - outcomes)
                _say(
                    f"[{self.state.now():6.1f}s] {missing} outcomes did not come in 30 s "
                    "(late records go to the dead-letter topic); reconciling what there is"
                )
                return
            if archived >= inputs and outcomes >= expected:
                _say(
                    f"[{self.state.now():6.1f}s] settled: {archived:,} events and "
                    f"{len(outcomes):,} click outcomes archived"
                )
                return
            if time.monotonic() - last_view >= 5:
                _say(
                    f"[{self.state.now():6.1f}s] settling: {archived:,}/{inputs:,} events, "
                    f"{len(outcomes & expected):,}/{len(expected):,} outcomes archived"
                )
                last_view = time.monotonic()
            time.sleep(2)
        _say("warning: the pipeline did not settle within the time limit; reporting what there is")

    def spark(self) -> tuple[str | None, int]:
        _say(
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
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, partitions, 1) for t in TOPICS])
    finally:
        await admin.close()


def _restore_progress(log: str) -> str:
    last = None
    for found in RESTORING.finditer(log[-20_000:]):
        last = found
    if last is None:
        return ""
    done, total = (int(x.replace(",", "")) for x in last.group(2, 3))
    if total == 0 or done >= total:
        return ""
    filled = int(20 * done / total)
    return f"restoring [{'#' * filled}{'.' * (20 - filled)}] {done:,}/{total:,}"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _parquet_files(root: Path) -> Iterator[Path]:
    if root.exists():
        yield from sorted(root.rglob("*.parquet"))


def _archived_outcomes(archive: Path) -> set[str]:
    import pyarrow.parquet as pq

    found: set[str] = set()
    for path in _parquet_files(archive / "outcomes"):
        found.update(pq.read_table(path, columns=["click_id"]).column(0).to_pylist())
    return found


def _decidable_clicks(rows: list[dict[str, Any]], window: JoinWindow) -> set[str]:
    """Clicks whose outcome the stream emits by the end of the input: their task's
    stream time (largest event time on their partition) decides them
    (:meth:`JoinWindow.is_decided`, the rule the stream and Spark use)."""
    final: dict[int, int] = {}
    clicks: list[tuple[str, int, int]] = []
    for row in rows:
        if row.get("malformed") is not None:
            continue
        value = json.loads(row["value"])
        partition = int(row["partition"])
        final[partition] = max(final.get(partition, 0), int(value["ts_ms"]))
        if "click_id" in value:
            clicks.append((value["click_id"], partition, int(value["ts_ms"])))
    return {cid for cid, p, ts in clicks if window.is_decided(ts, final[p])}


def _archived_inputs(archive: Path) -> int:
    import pyarrow.parquet as pq

    return sum(
        pq.ParquetFile(path).metadata.num_rows
        for dataset in ("impressions", "clicks")
        for path in _parquet_files(archive / dataset)
    )


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def run_demo(options: DemoOptions) -> int:
    """Run the demo; return the exit status (0: reconciled with no difference).

    SIGTERM, like Ctrl-C, stops the broker, the generator and every worker first.
    """
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _Demo(options).run()
    finally:
        signal.signal(signal.SIGTERM, previous)
