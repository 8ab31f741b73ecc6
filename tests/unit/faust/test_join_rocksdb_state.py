"""The join's state in a real RocksDB database (rocksdict), as the operator keeps it."""

from __future__ import annotations

import json
from pathlib import Path

import rocksdict

from streamjoin.ads.attribution import Click, Impression, attribute
from streamjoin.ads.policy import AdAttribution
from streamjoin.faust.join.batch_state import BatchState
from streamjoin.join.window import JoinWindow

WINDOW = JoinWindow(before=0, after=3_000, grace=1_000)
OFFSET_KEY = b"__faust\0offset__"
BASE = 1_767_225_600_000


def _db(path: Path) -> rocksdict.Rdict:
    return rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))


def _events(n: int) -> list[Impression | Click]:
    out: list[Impression | Click] = []
    for i in range(n):
        ts = BASE + i * 100
        out.append(Impression(f"a{i}", f"i{i}", ts, f"c{i % 5}", 0.25))
        if i % 3:
            out.append(Click(f"a{i}", f"k{i}", ts + 40))
        if i % 7 == 0:
            out.append(Click(f"a{i}", f"k{i}b", ts + 90))
    return out


def _keys(db: rocksdict.Rdict) -> int:
    return sum(1 for key, _ in db.items() if key != OFFSET_KEY)


def _feed(task: object, record: Impression | Click) -> list[bytes]:
    feed = task.on_left if isinstance(record, Impression) else task.on_right  # type: ignore[attr-defined]
    # each record a chunk of its own: the runtime settles after each chunk
    return [e.value for e in (*feed(record), *task.settle())]  # type: ignore[attr-defined]


def test_state_on_disk_stays_flat_across_many_windows(tmp_path: Path) -> None:
    db = _db(tmp_path / "db")
    state = BatchState()
    state.db = db
    task = AdAttribution(WINDOW).task(state)
    sizes = []
    for n, record in enumerate(_events(20_000)):
        _feed(task, record)
        if n % 500 == 499:
            task.checkpoint()  # type: ignore[attr-defined]
            state.commit(OFFSET_KEY, n)
        if n % 5_000 == 4_999:
            sizes.append(_keys(db))
    # one window (3 s) + grace (1 s) of events at 10 impressions/s: ~40 impressions
    # and their clicks, plus the local indexes; never the 20,000 fed
    assert max(sizes) < 400, sizes
    assert max(sizes) - min(sizes) <= 0.2 * max(sizes), sizes
    db.close()


def test_restoring_the_changelog_into_a_fresh_database_continues_exactly(tmp_path: Path) -> None:
    """Worker A processes part of the input; worker B restores A's changelog into
    an empty database and continues: together they emit the reference outcomes."""
    events = _events(3_000)
    impressions = [e for e in events if isinstance(e, Impression)]
    clicks = [e for e in events if isinstance(e, Click)]
    db_a = _db(tmp_path / "a")
    state_a = BatchState()
    state_a.db = db_a
    task_a = AdAttribution(WINDOW).task(state_a)
    changelog: list[tuple[bytes, bytes | None]] = []
    outcomes: dict[str, bytes] = {}
    cut = 4_000
    for n, record in enumerate(events[:cut]):
        for value in _feed(task_a, record):
            doc = json.loads(value)
            assert doc["click_id"] not in outcomes
            outcomes[doc["click_id"]] = value
        if n % 250 == 249 or n == cut - 1:
            task_a.checkpoint()  # type: ignore[attr-defined]
            changelog.extend(state_a.content)
            state_a.commit(OFFSET_KEY, len(changelog) - 1)
    db_a.close()
    db_b = _db(tmp_path / "b")
    for key, value in changelog:  # what the restorer does, record by record
        if value is None:
            db_b.delete(key)
        else:
            db_b.put(key, value)
    state_b = BatchState()
    state_b.db = db_b
    task_b = AdAttribution(WINDOW).task(state_b)
    task_b.rebuild_indexes()
    for record in events[cut:]:
        for value in _feed(task_b, record):
            doc = json.loads(value)
            assert doc["click_id"] not in outcomes
            outcomes[doc["click_id"]] = value
    for item in task_b.logic.flush():  # type: ignore[attr-defined]
        outcomes[item.click_id] = b"flushed"
    reference = attribute(impressions, clicks, WINDOW)
    decided = {cid: json.loads(v)["outcome"] for cid, v in outcomes.items() if v != b"flushed"}
    assert set(outcomes) == set(reference)
    assert decided == {cid: reference[cid].outcome.value for cid in decided}
    assert len(decided) > 0.9 * len(reference)
    db_b.close()
