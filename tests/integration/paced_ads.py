"""The example's paced run for fault tests: a generator producing steadily while
real workers of ``streamjoin.ads.app`` join, and the reference every decided
click's outcome is checked against (computed from the generator's record of
what it produced, never from the stream)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from kafka_util import end_offsets, read_rocksdb, read_topics, run, topic_names, wait_until

from streamjoin.ads.attribution import ClickOutcome, attribute
from streamjoin.ads.generator import clicks_from_record, impressions_from_record, read_record
from streamjoin.ads.keys import DUE, EXPIRY
from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.dev.faults import BrokerBehindProxy
from streamjoin.dev.process import WorkerProcess
from streamjoin.join.window import JoinWindow
from streamjoin.restore.owner_tokens import OWNER_KEY, fence

OUTCOME_TOPICS = ("attributed-clicks", "duplicate-clicks", "unattributed-clicks")


def outcomes_by_click(bootstrap: str, prefix: str) -> dict[str, list[dict[str, Any]]]:
    """Every outcome on the outcome topics under *prefix*, per click id; each
    document also holds its topic (``_topic``, without the prefix) and key (``_key``)."""
    by_click: dict[str, list[dict[str, Any]]] = {}
    topics = [prefix + t for t in OUTCOME_TOPICS]
    for topic, record in run(read_topics(bootstrap, topics)):
        doc = json.loads(record.value)
        doc["_topic"] = topic[len(prefix) :]
        doc["_key"] = record.key.decode()
        by_click.setdefault(doc["click_id"], []).append(doc)
    return by_click


class PacedAds:
    """One paced run: topics under *prefix*, workers with one standby each."""

    def __init__(
        self,
        broker: EmbeddedBroker | BrokerBehindProxy,
        tmp_path: Path,
        app_id: str,
        *,
        partitions: int = 8,
        grace_ms: int = 10_000,
        max_idle_ms: int = 2_000,
    ) -> None:
        self.broker = broker
        self.tmp_path = tmp_path
        self.prefix = app_id + "-"
        self.partitions = partitions
        self.grace_ms = grace_ms
        self.env = {
            "ADS_APP_ID": app_id,
            "ADS_TOPIC_PREFIX": self.prefix,
            "ADS_PARTITIONS": str(partitions),
            "ADS_GRACE_MS": str(grace_ms),
            "ADS_MAX_IDLE_MS": str(max_idle_ms),
        }
        self.record = tmp_path / "events.jsonl"
        self.workers: list[WorkerProcess] = []
        self.generator: subprocess.Popen[bytes] | None = None

    def worker(self, name: str) -> WorkerProcess:
        worker = WorkerProcess(
            "streamjoin.ads.app:app",
            self.broker.url,
            self.tmp_path / name,
            self.tmp_path / f"{name}.log",
            env=self.env,
            extra_args=("--standby-replicas", "1"),
        )
        self.workers.append(worker)
        return worker

    def start_workers(self, *names: str) -> list[WorkerProcess]:
        """Start a worker of each name and wait until every one is ready."""
        workers = [self.worker(name).start() for name in names]
        for worker in workers:
            worker.wait_for_log(r"Worker\]: Ready", timeout=90)
        return workers

    def start_generator(
        self, *, seed: int, duration: int, rate: int, speed: int, malformed_rate: float = 0.01
    ) -> None:
        """Produce ``duration`` s of event time at ``speed``x (bounded: it ends by itself);
        returns once every partition of the clicks topic has records. The
        record of what was produced is written when the generator ends."""
        argv = [
            sys.executable, "-m", "streamjoin.ads.generator",
            "--bootstrap", self.broker.bootstrap, "--seed", str(seed),
            "--duration", str(duration), "--rate", str(rate), "--speed", str(speed),
            "--jitter-ms", "2000", "--malformed-rate", str(malformed_rate),
            "--partitions", str(self.partitions), "--topic-prefix", self.prefix,
            "--create-topics", "--record", str(self.record),
            "--tail-ms", str(self.grace_ms + 60_000),
        ]  # fmt: skip
        self.generator = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        wait_until(self._producing, 60, "the generator's first records", interval=0.5)

    def _producing(self) -> bool:
        """Has the generator created the topics and produced to every partition?"""
        generator = self.generator
        if generator is not None and generator.poll() is not None:
            err = generator.stderr.read() if generator.stderr else b""
            raise AssertionError(f"the generator exited ({generator.returncode}): {err!r}")
        topic = self.prefix + "clicks"
        # asking for a missing topic's offsets would create it (auto-creation)
        if topic not in run(topic_names(self.broker.bootstrap)):
            return False
        ends = run(end_offsets(self.broker.bootstrap, topic, self.partitions))
        return len(ends) == self.partitions and all(n > 0 for n in ends.values())

    def wait_generator(self, timeout: float) -> None:
        generator = self.generator
        assert generator is not None
        code = generator.wait(timeout=timeout)
        err = generator.stderr.read() if generator.stderr else b""
        assert code == 0, err

    def stop(self) -> None:
        """Stop the generator and every worker (by process group)."""
        generator = self.generator
        if generator is not None:
            if generator.poll() is None:
                generator.kill()
                generator.wait(timeout=10)
            if generator.stderr is not None:
                generator.stderr.close()
        for worker in self.workers:
            if worker.running():
                worker.kill()

    def reference(self) -> tuple[dict[str, ClickOutcome], set[tuple[str, int, int]]]:
        """Outcomes of the clicks decided by the end of the input, and the
        ``(topic, partition, offset)`` of every malformed record produced."""
        rows = read_record(self.record)
        impressions = impressions_from_record(rows, self.prefix + "impressions")
        clicks = clicks_from_record(rows, self.prefix + "clicks")
        final = dict.fromkeys(range(self.partitions), 0)
        partition_of: dict[str, int] = {}
        for row in rows:
            if row["malformed"] is None:
                final[row["partition"]] = max(final[row["partition"]], row["ts_ms"])
                partition_of[row["key"]] = row["partition"]
        window = JoinWindow(before=0, after=30 * 60 * 1000, grace=self.grace_ms)
        decided = {
            c.click_id for c in clicks if window.is_decided(c.ts, final[partition_of[c.key]])
        }
        reference = {
            cid: o for cid, o in attribute(impressions, clicks, window).items() if cid in decided
        }
        malformed = {(r["topic"], r["partition"], r["offset"]) for r in rows if r["malformed"]}
        return reference, malformed

    def outcomes(self) -> dict[str, list[dict[str, Any]]]:
        return outcomes_by_click(self.broker.bootstrap, self.prefix)

    def wait_for_outcomes(
        self, reference: dict[str, ClickOutcome], timeout: float
    ) -> dict[str, list[dict[str, Any]]]:
        def settled() -> dict[str, list[dict[str, Any]]] | None:
            got = self.outcomes()
            return got if set(got) >= set(reference) else None

        try:
            return wait_until(settled, timeout, "an outcome for every decided click", 2.0)  # type: ignore[no-any-return]
        except TimeoutError:
            missing = sorted(set(reference) - set(self.outcomes()))
            _, malformed = self.reference()
            letters = {s: r for s, r in self.dead_letters().items() if s not in malformed}
            raise AssertionError(
                f"{len(missing)} decided clicks have no outcome, e.g. {missing[:5]}; "
                f"{len(letters)} valid records dead-lettered, e.g. {list(letters.values())[:2]}"
            ) from None

    def check_every_click(self, *, timeout: float, at_least: int) -> None:
        """Once the generator ended: every decided click got exactly one distinct
        outcome, the reference's, within *timeout* s; no valid record was
        dead-lettered; more than *at_least* clicks were decided."""
        from test_join_workers import _check_against_reference

        self.wait_generator(timeout=180)
        reference, malformed = self.reference()
        outcomes = self.wait_for_outcomes(reference, timeout=timeout)
        _check_against_reference(outcomes, reference)
        valid_dead_lettered = self.dead_letter_sources() - malformed
        assert valid_dead_lettered == set(), f"{len(valid_dead_lettered)} valid records"
        assert len(reference) > at_least

    def dead_letters(self) -> dict[tuple[str, int, int], str]:
        """``(topic, partition, offset)`` of every dead-lettered record -> its reason."""
        topic = self.prefix + "ads-dead-letters"
        letters = {}
        for _, letter in run(read_topics(self.broker.bootstrap, [topic])):
            headers = dict(letter.headers)
            name, part, offset = headers["streamjoin-source"].decode().rsplit(":", 2)
            letters[(name, int(part), int(offset))] = headers["streamjoin-reason"].decode()
        return letters

    def dead_letter_sources(self) -> set[tuple[str, int, int]]:
        """``(topic, partition, offset)`` of every dead-lettered record."""
        return set(self.dead_letters())


def assert_local_states_are_their_changelog(
    bootstrap: str, topic: str, partitions: int, workers: list[WorkerProcess]
) -> None:
    """Each worker's RocksDB copy of each task (active or standby; its content,
    not its local indexes) equals the task's changelog restored through the
    fence up to the offset the copy says it holds: what the worker built by
    running the task, or by following it, is what any later owner restores,
    zombies' late writes left out."""
    by_partition: dict[int, list[Any]] = {}
    for _, record in run(read_topics(bootstrap, [topic])):
        by_partition.setdefault(record.partition, []).append(record)
    compared = 0
    for partition in range(partitions):
        records = sorted(by_partition.get(partition, []), key=lambda r: r.offset)
        for worker in workers:
            local, offset = read_rocksdb(worker.datadir, "billing-state", partition)
            if offset is None:
                continue
            local.pop(OWNER_KEY, None)
            # the due and expiry indexes are local: rebuilt when a task opens
            local = {k: v for k, v in local.items() if k[:1] not in (DUE, EXPIRY)}
            restored: dict[bytes, bytes] = {}
            for r in fence(None, [r for r in records if r.offset <= offset]).apply:
                if r.value is None:
                    restored.pop(r.key, None)
                else:
                    restored[r.key] = r.value
            assert local == restored, (worker.log_path.name, partition, offset)
            compared += 1
    assert compared >= partitions
