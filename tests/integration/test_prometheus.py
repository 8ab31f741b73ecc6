"""A real Prometheus scrapes real workers of the ad app: its figures are what happened (issue 40).

Two ``streamjoin worker`` processes of ``streamjoin.ads.app:app`` at its shipped
defaults (only the app id and the topic prefix are the test's own) run on the
embedded broker with their web servers on; Debian's Prometheus 2.42
(tests/prometheus_bin.py) scrapes ``/metrics`` of each every second. Once the
group is stable the test produces a known set of records: the example
generator's (seeded, bounded, with its own malformed records) and a few
records of invalid JSON and bytes on both inputs. Through Prometheus' HTTP
query API (instant queries, retried until they hold or a deadline passes):

* the join's input records, summed over the workers and per input, are the
  records produced; its dead letters of ``reason="malformed"`` are the
  malformed records produced;
* the join's outcomes come under the app's output names only (dead letters are
  not an output kind);
* the active tasks summed over the workers are the group's task count, and the
  leader's ``streamjoin_group_tasks{kind="all"}`` says the same.

Then a third worker joins. While it does, the running workers' ``/metrics`` are
read directly in a loop: every answer is 200 and parses as the text format, and
Prometheus' ``up`` of the first two stays 1 over that time. Once the newcomer
runs tasks, Prometheus shows a rebalance counted on each of the first two
workers, and the newcomer's ``streamjoin_restore_remaining_records`` exists and
is 0 for every partition it restored.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_util import create_topic, produce, produce_events, run
from prometheus_client.parser import text_string_to_metric_families

from streamjoin.ads.app import AdsSettings
from streamjoin.ads.generator import GeneratorConfig, generate
from streamjoin.dev.broker import EmbeddedBroker, free_port
from streamjoin.dev.process import WorkerProcess

pytestmark = [pytest.mark.broker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
APP_ID = "ads-prometheus"
PREFIX = f"{APP_ID}-"
#: the app's shipped partition count (its inputs and its tasks)
PARTITIONS = AdsSettings().partitions
#: invalid records added to the generator's own malformed ones: (topic, key, value)
BROKEN: list[tuple[str, bytes, bytes]] = [
    (PREFIX + "clicks", b"bad-1", b'{"auction_id": "bad-1", "click'),
    (PREFIX + "clicks", b"bad-2", b"not json at all"),
    (PREFIX + "clicks", b"bad-3", b"\xff\xfe"),
    (PREFIX + "clicks", b"bad-4", b"[1, 2, 3]"),
    (PREFIX + "impressions", b"bad-5", b'{"auction_id": '),
    (PREFIX + "impressions", b"bad-6", b"\x00\x01\x02"),
]
#: the longest any one wait may take (s); the whole test takes well under 90 s
STARTUP_S = 60.0
SETTLE_S = 40.0
COUNTS_S = 40.0

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only


def _get(url: str, timeout: float = 3.0) -> tuple[int, bytes]:
    """``GET url``: its status and body (``OSError`` when nothing answers)."""
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        with contextlib.closing(exc):
            return int(exc.code), exc.read()


# -- Prometheus ----------------------------------------------------------------------------


class Prometheus:
    """Debian's ``prometheus`` in its own process group, scraping the workers' ports.

    Every worker is a static target labelled ``worker="<name>"`` (a target not
    started yet is simply down). Stopped by its process group id, never by name.
    """

    def __init__(self, binary: Path, workdir: Path, targets: dict[str, int]) -> None:
        self.binary = binary
        self.workdir = workdir
        self.targets = targets
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def config(self) -> str:
        groups = [
            {"targets": [f"127.0.0.1:{port}"], "labels": {"worker": name}}
            for name, port in sorted(self.targets.items())
        ]
        doc = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {"job_name": "streamjoin", "metrics_path": "/metrics", "static_configs": groups}
            ],
        }
        return json.dumps(doc, indent=2)  # JSON is YAML

    def start(self) -> Prometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(self.config())
        argv = [
            str(self.binary),
            f"--config.file={config}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError):
                if _get(f"{self.url}/-/ready", timeout=1)[0] == 200:
                    return self
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"prometheus did not get ready:\n{self.log_text()[-3000:]}")
            time.sleep(0.2)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL if it has not exited 10 s later."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant query: ``(labels, value)`` per series of the vector."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        status, body = _get(url)
        doc = json.loads(body)
        assert status == 200 and doc["status"] == "success", (expr, status, doc)
        assert doc["data"]["resultType"] == "vector", (expr, doc)
        return [(r["metric"], float(r["value"][1])) for r in doc["data"]["result"]]

    def scalar(self, expr: str) -> float | None:
        """The one value of *expr* (``None``: no series)."""
        found = self.query(expr)
        assert len(found) <= 1, (expr, found)
        return found[0][1] if found else None

    def by(self, label: str, expr: str) -> dict[str, float]:
        """*expr*'s values keyed by *label*."""
        return {labels.get(label, ""): value for labels, value in self.query(expr)}

    def wait(self, read: Callable[[], Any], holds: Callable[[Any], bool], what: str,
             timeout: float) -> Any:  # fmt: skip
        """Read until *holds* is true of the reading twice in a row, 1.2 s apart
        (a scrape later), at most *timeout* s; then the reading. On timeout the
        last reading is in the error."""
        deadline = time.monotonic() + timeout
        value: Any = None
        while True:
            value = read()
            if holds(value):
                time.sleep(1.2)
                again = read()
                if holds(again) and again == value:
                    return again
                value = again
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still {value!r} after {timeout:.0f} s")
            time.sleep(0.5)


@pytest.fixture
def prometheus_factory(
    prometheus_bin: Path, tmp_path: Path
) -> Iterator[Callable[[dict[str, int]], Prometheus]]:
    started: list[Prometheus] = []

    def start(targets: dict[str, int]) -> Prometheus:
        server = Prometheus(prometheus_bin, tmp_path / "prometheus", targets)
        started.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in started:
            server.stop()


# -- the workers' own pages ----------------------------------------------------------------


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of a text exposition, by ``(name, labels)``; raises when it
    does not parse (prometheus_client's parser, as a scraper would)."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = float(sample.value)
    return out


def scrape(port: int) -> Samples | None:
    """The worker's ``/metrics``, parsed; ``None`` while nothing answers there.
    A status other than 200, or a page that does not parse, fails the test."""
    try:
        status, body = _get(f"http://127.0.0.1:{port}/metrics", timeout=3)
    except OSError:
        return None
    assert status == 200, (port, status, body[:500])
    return parse(body.decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    """Sum of *name*'s samples whose labels include *labels*."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def series(samples: Samples, name: str) -> list[tuple[dict[str, str], float]]:
    return [(dict(ls), v) for (n, ls), v in samples.items() if n == name]


def settled(pages: dict[str, Samples | None], members: int) -> bool:
    """Every worker answers, runs active tasks, no warm-up, one generation, and
    a leader's last assignment is that generation with *members* members and
    as many tasks as the workers run."""
    if any(p is None for p in pages.values()):
        return False
    got = [p for p in pages.values() if p is not None]
    generations = {value(p, "streamjoin_assignment_generation") for p in got}
    if len(generations) != 1 or not all(series(p, "streamjoin_assignment_generation") for p in got):
        return False
    (generation,) = generations
    if any(value(p, "streamjoin_tasks", kind="active") == 0 for p in got):
        return False
    if any(value(p, "streamjoin_tasks", kind="warmup") for p in got):
        return False
    leaders = [p for p in got if value(p, "streamjoin_group_generation") == generation]
    if len(leaders) != 1:
        return False
    (leader,) = leaders
    active = sum(value(p, "streamjoin_tasks", kind="active") for p in got)
    return (
        value(leader, "streamjoin_group_members") == members
        and value(leader, "streamjoin_group_tasks", kind="all") == active
    )


def wait_settled(ports: dict[str, int], members: int, timeout: float) -> dict[str, Samples]:
    """The workers' pages once :func:`settled` held twice, 1 s apart."""
    deadline = time.monotonic() + timeout
    while True:
        pages = {name: scrape(port) for name, port in ports.items()}
        if settled(pages, members):
            time.sleep(1.0)
            again = {name: scrape(port) for name, port in ports.items()}
            if settled(again, members):
                return {n: p for n, p in again.items() if p is not None}
        if time.monotonic() > deadline:
            raise AssertionError(f"the group of {sorted(ports)} did not settle in {timeout:.0f} s")
        time.sleep(0.3)


# -- the test ------------------------------------------------------------------------------


def _worker(broker: EmbeddedBroker, tmp_path: Path, name: str, port: int) -> WorkerProcess:
    """A worker of the ad app at its defaults, its web server on *port*."""
    return WorkerProcess(
        "streamjoin.ads.app:app",
        broker.url,
        tmp_path / name,
        tmp_path / f"{name}.log",
        env={"ADS_APP_ID": APP_ID, "ADS_TOPIC_PREFIX": PREFIX},
        extra_args=("--with-web", "--web-port", str(port), "--web-bind", "127.0.0.1"),
        cwd=REPO,
    )


def test_a_real_prometheus_scraping_real_workers_sees_what_happened(
    broker: EmbeddedBroker,
    tmp_path: Path,
    prometheus_factory: Callable[[dict[str, int]], Prometheus],
) -> None:
    began = time.monotonic()
    for side in ("impressions", "clicks"):
        run(create_topic(broker.bootstrap, PREFIX + side, PARTITIONS))
    ports = {name: free_port() for name in ("w1", "w2", "w3")}
    workers = {name: _worker(broker, tmp_path, name, port) for name, port in ports.items()}
    try:
        prom = prometheus_factory(ports)
        first = {n: ports[n] for n in ("w1", "w2")}
        for name in first:
            workers[name].start()
        wait_settled(first, members=2, timeout=STARTUP_S)
        print(f"two workers settled {time.monotonic() - began:.1f} s after the start")

        # -- known records: the generator's (some malformed) and a few broken ones
        events = list(
            generate(
                GeneratorConfig(
                    seed=40,
                    impressions=1_000,
                    rate=20.0,  # 50 s of event time: clicks of most impressions in it
                    malformed_rate=0.02,
                    partitions=PARTITIONS,
                    impressions_topic=PREFIX + "impressions",
                    clicks_topic=PREFIX + "clicks",
                )
            )
        )
        run(produce_events(broker.bootstrap, events), timeout=120)
        for topic, key, raw in BROKEN:
            run(produce(broker.bootstrap, topic, [(key, raw, None)]))
        per_input = Counter(e.topic for e in events) + Counter(t for t, _, _ in BROKEN)
        produced = sum(per_input.values())
        malformed = sum(1 for e in events if e.malformed is not None) + len(BROKEN)
        print(
            f"produced {produced} records ({dict(sorted(per_input.items()))}), "
            f"{malformed} of them malformed ({len(BROKEN)} added to the generator's)"
        )

        # -- what Prometheus saw of the two workers
        total = prom.wait(
            lambda: prom.scalar("sum(streamjoin_join_input_records_total)"),
            lambda v: v == produced,
            "sum(streamjoin_join_input_records_total)",
            COUNTS_S,
        )
        inputs = prom.by("input", "sum by (input) (streamjoin_join_input_records_total)")
        assert inputs == {t: float(n) for t, n in per_input.items()}, (inputs, per_input)
        dead = prom.wait(
            lambda: prom.scalar('sum(streamjoin_join_dead_letters_total{reason="malformed"})'),
            lambda v: v == malformed,
            'sum(streamjoin_join_dead_letters_total{reason="malformed"})',
            COUNTS_S,
        )
        late = prom.scalar('sum(streamjoin_join_dead_letters_total{reason="late"})')
        outputs = prom.by("kind", "sum by (kind) (streamjoin_join_outputs_total)")
        by_worker = prom.by("worker", "sum by (worker) (streamjoin_join_input_records_total)")
        active = prom.by("worker", 'sum by (worker) (streamjoin_tasks{kind="active"})')
        tasks = sum(active.values())
        leader = prom.by(
            "worker",
            'streamjoin_group_tasks{kind="all"} and on (worker) '
            "(streamjoin_group_generation == scalar(max(streamjoin_assignment_generation)))",
        )
        join_tasks = prom.scalar("count(count by (task) (streamjoin_join_task_records_total))")
        print(
            f"Prometheus: input records {total:.0f} (per input {inputs}, per worker "
            f"{by_worker}), malformed dead letters {dead:.0f}, late {late}, outputs "
            f"{outputs}; active tasks "
            f"{active} = {tasks:.0f}; the leader's group_tasks{{kind=all}} {leader}; "
            f"the join's tasks {join_tasks}"
        )
        # outcomes by the app's output names only (dead letters are counted apart)
        assert set(outputs) == set(AdsSettings().topics.outputs), outputs
        assert set(active) == {"w1", "w2"} and all(active.values()), active
        assert len(leader) == 1 and list(leader.values()) == [tasks], (leader, tasks)
        # the join's tasks are its input partitions (the rest: the leader's topic, one)
        assert join_tasks == PARTITIONS
        assert tasks >= PARTITIONS

        # -- a third worker joins, while the first two's pages are read in a loop
        before = prom.by("worker", 'sum by (worker) (streamjoin_rebalances_total{worker=~"w1|w2"})')
        assert set(before) == {"w1", "w2"}, before
        joined_at = time.monotonic()
        workers["w3"].start()
        scrapes: Counter[str] = Counter()
        deadline = joined_at + SETTLE_S
        held = 0.0
        while True:
            pages = {name: scrape(port) for name, port in ports.items()}
            for name in first:
                assert pages[name] is not None, f"{name} stopped answering on /metrics"
                scrapes[name] += 1
            if pages["w3"] is not None:
                scrapes["w3"] += 1
            new = pages["w3"]
            ready = (
                settled(pages, members=3)
                and new is not None
                and series(new, "streamjoin_restore_remaining_records")
                and max(v for _, v in series(new, "streamjoin_restore_remaining_records")) == 0
            )
            if ready:
                held = held or time.monotonic()
                if time.monotonic() - held >= 1.5:  # held over a Prometheus scrape or more
                    break
            else:
                held = 0.0
            assert time.monotonic() < deadline, (
                f"w3 not running restored tasks {SETTLE_S:.0f} s after it started: "
                f"{ {n: p and series(p, 'streamjoin_tasks') for n, p in pages.items()} }"
            )
            time.sleep(0.1)
        joined_s = time.monotonic() - joined_at
        print(f"w3 ran restored tasks {joined_s:.1f} s after its start; direct scrapes {scrapes}")

        after = prom.wait(
            lambda: prom.by(
                "worker", 'sum by (worker) (streamjoin_rebalances_total{worker=~"w1|w2"})'
            ),
            lambda v: set(v) == {"w1", "w2"} and all(v[w] > before[w] for w in before),
            "rebalances of w1 and w2",
            10,
        )
        kinds = prom.by("kind", 'sum by (kind) (streamjoin_rebalances_total{worker=~"w1|w2"})')
        remaining = prom.wait(
            lambda: prom.query('streamjoin_restore_remaining_records{worker="w3"}'),
            lambda v: bool(v) and max(x for _, x in v) == 0,
            "w3's restore_remaining_records",
            10,
        )
        restored = prom.scalar('sum(streamjoin_restore_records_total{worker="w3"})')
        window = int(time.monotonic() - joined_at) + 2
        up = prom.by("worker", f'min_over_time(up{{worker=~"w1|w2"}}[{window}s])')
        up_samples = prom.by("worker", f'count_over_time(up{{worker=~"w1|w2"}}[{window}s])')
        slowest = prom.by(
            "worker", f'max_over_time(scrape_duration_seconds{{worker=~"w1|w2"}}[{window}s])'
        )
        active3 = prom.wait(
            lambda: prom.by("worker", 'sum by (worker) (streamjoin_tasks{kind="active"})'),
            lambda v: set(v) == set(ports) and all(v.values()),
            "active tasks of the three workers",
            10,
        )
        leader3 = prom.by(
            "worker",
            'streamjoin_group_tasks{kind="all"} and on (worker) '
            "(streamjoin_group_generation == scalar(max(streamjoin_assignment_generation)))",
        )
        total3 = prom.scalar("sum(streamjoin_join_input_records_total)")
        errors = prom.scalar("sum(streamjoin_scrape_errors_total)")
        print(
            f"Prometheus after w3 joined: rebalances of w1, w2 {before} -> {after} "
            f"(by kind {kinds}); w3's restore_remaining_records "
            f"{[(s.get('topic'), s.get('partition'), x) for s, x in remaining]}, restored "
            f"records {restored}; min up over the last {window} s {up} "
            f"({up_samples} samples, slowest scrape {slowest} s); active tasks {active3} = "
            f"{sum(active3.values()):.0f}, "
            f"the leader's group_tasks {leader3}; input records now {total3}; "
            f"scrape errors {errors}"
        )
        assert up == {"w1": 1.0, "w2": 1.0}, up
        assert all(n >= window - 3 for n in up_samples.values()), up_samples
        assert list(leader3.values()) == [sum(active3.values())], (leader3, active3)
        took = time.monotonic() - began
        print(f"the test took {took:.1f} s")
    except BaseException:
        for name, worker in workers.items():
            print(f"--- {name}'s log, the end:\n{worker.log_text()[-4000:]}")
        raise
    finally:
        for worker in workers.values():
            worker.kill()
