"""``streamjoin demo``: the ad-monetization pipeline end to end on one machine.

Starts the embedded broker, creates the topics, runs the seeded generator and
three workers of ``streamjoin.ads.app`` (one standby each, archiving
to Parquet; it prints where to scrape each one's ``/metrics`` and
scrapes them itself every second), adds a fourth worker and ``kill -9``\\s
one of the first three midway, waits until every event is joined and
archived, stops the workers, runs the Spark job (campaign report and
reconciliation of the stream's outcomes against the batch join) and writes an
HTML report with charts (one of them drawn from the scraped metrics).

Everything goes under ``--out``: ``archive/`` (Parquet), ``report/``
(``index.html``, PNG charts, the Spark report), ``reconciliation/``,
``logs/`` (broker, generator, workers, Spark) and ``events.jsonl`` (every
produced record, as the generator's ``--record`` writes it).

This module holds the run's script (:func:`run_demo`); the options are in
:mod:`.options`, the processes in :mod:`.processes`, the sampling and live
view in :mod:`.watch`, the wait for the archive in :mod:`.settle` and the
HTML report in :mod:`.report` (what it draws in :mod:`.timeline` and
:mod:`.stops`).
"""

from __future__ import annotations

import shutil
import signal
import time
from typing import Any

from streamjoin.ads.demo.options import DemoOptions
from streamjoin.ads.demo.processes import DemoProcesses
from streamjoin.ads.demo.scrape import MetricsScraper, metrics_url
from streamjoin.ads.demo.settle import settle
from streamjoin.ads.demo.state import GENERATOR_DONE, DemoState, Worker, say
from streamjoin.ads.demo.watch import live_view, sample_workers
from streamjoin.errors import ConfigurationError

__all__ = ["DemoOptions", "run_demo"]


class _Demo:
    """One run of the demo: the script that drives the processes."""

    def __init__(self, options: DemoOptions) -> None:
        self.options = options
        self.out = options.out
        self.state = DemoState()
        self.processes = DemoProcesses(options, self.state)
        #: every running worker's /metrics, scraped in the background for the lag chart
        self.scraper = MetricsScraper(self._scrape_targets, self.state.now)

    def _scrape_targets(self) -> list[tuple[str, int]]:
        """``(name, web port)`` of every worker running now."""
        return [(w.name, w.web_port) for w in list(self.processes.workers) if w.process.running()]

    def prepare(self) -> None:
        """Create (or, with ``force``, empty) the output directory."""
        out = self.out
        if out.exists() and any(out.iterdir()):
            if not self.options.force:
                raise ConfigurationError(
                    f"{out} is not empty; pass --force to replace it or choose another --out"
                )
            shutil.rmtree(out)
        self.processes.logs.mkdir(parents=True)
        self.processes.archive.mkdir()

    def sample(self) -> None:
        """Record what every running worker holds now."""
        sample_workers(self.state, self.processes.workers)

    def live_view(self) -> None:
        """Print the generator's and every worker's status."""
        live_view(self.state, self.processes.workers, self.processes.generator)

    def run(self) -> int:
        """Run the demo end to end; return the Spark job's exit status."""
        options = self.options
        self.prepare()
        say(
            f"demo: seed {options.seed}, {options.duration:.0f} s of events at {options.speed:g}x "
            f"event time, {options.partitions} tasks, output in {self.out}"
        )
        try:
            self._start()
            self._generate()
            self.state.events.append((self.state.now(), GENERATOR_DONE))
            say(f"[{self.state.now():6.1f}s] generator done; waiting for the join and archive")
            settle(
                self.out / "events.jsonl",
                self.processes.archive,
                self.processes.settings.policy.window,
                self.state,
                self.sample,
            )
            end = self.state.now()
            self.scraper.stop()
            self.processes.stop_everything()
            say(f"[{self.state.now():6.1f}s] workers and broker stopped")
            verdict, spark_code = self.processes.run_spark()
            self._report(end, verdict)
            return spark_code
        finally:
            self.scraper.stop()
            self.processes.stop_everything()

    def _start(self) -> None:
        """Start the broker and workers w1, w2, w3; wait until they are ready."""
        self.processes.start_broker()
        for name in ("w1", "w2", "w3"):
            self.processes.start_worker(name)
        for worker in self.processes.workers:
            worker.process.wait_for_log(r"Worker\]: Ready", timeout=120)
        say("workers: w1 w2 w3 ready (1 standby per task); Prometheus metrics:")
        for worker in self.processes.workers:
            say(f"  scrape {worker.name} at {metrics_url(worker.web_port)}")
        self.scraper.start()

    def _generate(self) -> None:
        """Run the generator to its end; w4 joins at a third of ``duration`` and
        w2 is killed (-9) at half. Samples every second, shows them every 3 s."""
        options = self.options
        processes = self.processes
        processes.start_generator()
        begin = time.monotonic()
        added = killed = False
        last_view = 0.0
        while True:
            elapsed = time.monotonic() - begin
            if not added and elapsed >= options.duration / 3:
                w4 = processes.start_worker("w4")
                say(
                    f"[{self.state.now():6.1f}s] w4 joins the group; "
                    f"scrape w4 at {metrics_url(w4.web_port)}"
                )
                added = True
            if not killed and elapsed >= options.duration / 2:
                self._kill(processes.workers[1])
                killed = True
            self.sample()
            if time.monotonic() - last_view >= 3:
                self.live_view()
                last_view = time.monotonic()
            if processes.generator is not None and processes.generator.poll() is not None:
                break
            if elapsed > options.duration * 3 + 120:
                raise ConfigurationError(
                    "the generator did not finish in time; see logs/generator.log"
                )
            time.sleep(1)
        if processes.generator is not None and processes.generator.returncode != 0:
            raise ConfigurationError("the generator failed; see logs/generator.log")

    def _kill(self, victim: Worker) -> None:
        """``kill -9`` a worker and record it on the timeline."""
        victim.process.kill()
        victim.killed_at = self.state.now()
        self.state.events.append((victim.killed_at, f"{victim.name} killed (-9)"))
        say(f"[{self.state.now():6.1f}s] kill -9 {victim.name}")

    def _report(self, end: float, verdict: str | None) -> None:
        """Write the HTML report and print where it is and the verdict."""
        from streamjoin.ads.demo.report import write_report

        report = write_report(
            self.out,
            samples=self.state.samples,
            events=self.state.events,
            end=end,
            verdict=verdict,
            options=self.options,
            wall_start=self.state.wall_started,
            scraped=self.scraper.record(),
        )
        say(f"report: {report}")
        say(verdict or "reconciliation: no verdict (see logs/spark.log)")


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
