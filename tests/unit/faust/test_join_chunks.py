"""A join's records are applied a chunk at a time, with the outcomes of one at a time.

The router decodes a chunk in one call and feeds it to the task's logic in one
call (issue 38). Whatever a chunk holds (replays of decided clicks, duplicated
impressions, oversized and malformed records, late ones, the left watermark
passing the right one mid-chunk), each output gets the records out that
feeding them one record at a time gives (the router before chunks), in the
same order, and the task ends with the same counts. Real tasks on real
RocksDB databases.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import rocksdict

from streamjoin.ads.policy import AdAttribution
from streamjoin.faust.join.router import RecordRouter
from streamjoin.faust.join.stats import JoinStats
from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.join.types import LEFT, RIGHT, Fetched, Output
from streamjoin.join.policy import BadRecord
from streamjoin.join.window import JoinWindow

WINDOW = JoinWindow(before=0, after=2_000, grace=500)
BASE = 1_767_225_600_000
LIMIT = 2_048


def _inputs(seed: int) -> list[tuple[str, list[Fetched]]]:
    """Runs of records of one input at a time, in arrival order: every kind of
    record a chunk can hold, with event times out of order within the grace
    and beyond it."""
    rnd = random.Random(seed)
    runs: list[tuple[str, list[Fetched]]] = []
    offsets = {LEFT: 0, RIGHT: 0}
    clock = BASE
    sent: list[bytes] = []  # click values already sent, to replay
    for _ in range(60):
        side = LEFT if rnd.random() < 0.6 else RIGHT
        topic = "impressions" if side == LEFT else "clicks"
        run = []
        for _ in range(rnd.randint(1, 40)):
            clock += rnd.randint(0, 120)
            ts = clock - rnd.randint(0, 400) if rnd.random() < 0.9 else clock - 3_000  # late
            auction = f"a{rnd.randint(0, 30)}"
            if side == LEFT:
                doc = {"auction_id": auction, "impression_id": f"i{rnd.randint(0, 10**6)}",
                       "campaign": f"c{rnd.randint(0, 3)}", "cost": 0.25, "ts_ms": ts}  # fmt: skip
            else:
                doc = {"auction_id": auction, "click_id": f"k{rnd.randint(0, 10**6)}", "ts_ms": ts}
            value = json.dumps(doc).encode()
            roll = rnd.random()
            if roll < 0.03:
                value = b"{not json"
            elif roll < 0.05:
                value = b'{"pad": "' + b"x" * LIMIT + b'"}'
            elif roll < 0.12 and side == RIGHT and sent:
                value = rnd.choice(sent)  # a click again: its outcome again once decided
            elif roll < 0.16 and side == LEFT and run:
                value = run[-1].value  # the same impression twice: stored once
            if side == RIGHT and value.startswith(b'{"auction_id"'):
                sent.append(value)
            key = json.loads(value)["auction_id"].encode() if value.startswith(b'{"a') else b"a0"
            run.append(Fetched(topic, 0, offsets[side], key, value, 0))
            offsets[side] += 1
        runs.append((side, run))
    return runs


def _one_at_a_time(router: RecordRouter, task: JoinTask, side: str, records: list[Fetched]):
    """The records out of a chunk as the router gave them before chunks: each
    record decoded and fed on its own, the task's logic settled at the end."""
    logic, policy = task.logic, router.policy
    assert logic is not None
    decode = policy.decode_left if side == LEFT else policy.decode_right
    feed = logic.on_left if side == LEFT else logic.on_right
    out: list[Output] = []
    for record in records:
        size = len(record.key or b"") + len(record.value or b"")
        if size > router.max_record_bytes:
            out.append(router.oversized(record, size))
            continue
        try:
            decoded = decode(record.key, record.value, 0)
        except BadRecord as exc:
            out.append(router.dead_letter(record, exc.reason.encode()))
            continue
        out.extend(router.route(feed(decoded), record))
    out.extend(router.route(logic.settle()))
    return out


class _BeforeChunks:
    """The ad policy as a policy written before chunks: no ``decode_chunk``, and
    task logic without ``on_chunk``."""

    def __init__(self) -> None:
        self.inner = AdAttribution(WINDOW)
        self.window, self.outputs = self.inner.window, self.inner.outputs
        self.decode_left, self.decode_right = self.inner.decode_left, self.inner.decode_right

    def task(self, state: Any) -> Any:
        logic = self.inner.task(state)
        return SimpleNamespace(
            **{
                name: getattr(logic, name)
                for name in (
                    "on_left",
                    "on_right",
                    "settle",
                    "set_idle",
                    "rebuild_indexes",
                    "checkpoint",
                )
            },
            logic=logic.logic,
            decision_time=None,
        )


def _run(
    tmp_path: Path,
    name: str,
    runs: list[tuple[str, list[Fetched]]],
    chunked: bool,
    policy: Any = None,
):
    stats = JoinStats()
    policy = policy or AdAttribution(WINDOW)
    outputs = {kind: f"out-{kind}" for kind in AdAttribution(WINDOW).outputs}
    router = RecordRouter("billing", policy, stats, outputs, "dead", max_record_bytes=LIMIT)
    task = JoinTask(0, policy, max_idle_ms=1_000)
    task.open(rocksdict.Rdict(str(tmp_path / name)), 0)
    out: list[Output] = []
    for side, records in runs:
        if chunked:
            out.extend(router.apply(task, side, records))
        else:
            out.extend(_one_at_a_time(router, task, side, records))
    assert task.logic is not None
    counts = task.logic.logic.campaign_counts()  # type: ignore[attr-defined]
    task.state.db.close()
    return out, counts


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_chunk_gives_the_records_out_of_one_record_at_a_time(tmp_path: Path, seed: int) -> None:
    runs = _inputs(seed)
    chunked = _run(tmp_path, "chunked", runs, chunked=True)
    assert chunked == _run(tmp_path, "single", runs, chunked=False)
    # the runs hold every kind of record the test is about
    topics = {record[0] for record in chunked[0]}
    assert {"out-attributed", "out-duplicate", "out-unattributed"} <= topics
    reasons = [dict(r[3] or [])["streamjoin-reason"] for r in chunked[0] if r[0] == "dead"]
    for kind in (b"late: impression", b"late: click", b"record of", b"click: not JSON",
                 b"impression: not JSON"):  # fmt: skip
        assert any(reason.startswith(kind) for reason in reasons), kind


def test_a_policy_written_before_chunks_is_fed_one_record_at_a_time(tmp_path: Path) -> None:
    runs = _inputs(5)
    old = _run(tmp_path, "old", runs, chunked=True, policy=_BeforeChunks())
    assert old == _run(tmp_path, "single", runs, chunked=False)
    assert old[0]
