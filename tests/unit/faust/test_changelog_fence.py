"""The RocksDB writer applies the ownership fence exactly as the rule says, fetch by fetch.

The writer folds the rule into its one pass over a fetch; whatever the
records (owner tokens, markers of any epoch, plain records, tombstones) and
however they are cut into fetches, the database ends as :func:`fence` over
the whole log says, with the current owner stored beside the data.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocksdict import Options, Rdict

from streamjoin.faust.restore.changelog_store import RocksdictWriter
from streamjoin.restore.owner_tokens import (
    FENCE_HEADER,
    OWNER_HEADER,
    OWNER_KEY,
    Owner,
    fence,
    fence_key,
)

OFFSET_KEY = b"__faust\0offset__"
TOKENS = [b"tok-a", b"tok-b", b"tok-c"]


class _Store:
    """faust's rocksdb store as the writer uses it: one database per partition."""

    offset_key = OFFSET_KEY

    def __init__(self, path: Path) -> None:
        self.db = Rdict(str(path), options=Options(raw_mode=True))

    def _db_for_partition(self, partition: int) -> Rdict:
        return self.db

    def persisted_offset(self, tp: Any) -> Any:
        return self.db.get(OFFSET_KEY)


def _record(offset: int, kind: int, token: int, epoch: int, key: int) -> Any:
    if kind == 0:  # a marker
        owner = Owner(TOKENS[token], epoch)
        headers = [(FENCE_HEADER, owner.encode())]
        return SimpleNamespace(
            topic="c", partition=0, offset=offset, key=fence_key(owner.token), value=b"{}",
            headers=headers,
        )  # fmt: skip
    headers = [] if kind == 1 else [(OWNER_HEADER, TOKENS[token])]
    value = None if key == 0 else b"v%d" % offset
    return SimpleNamespace(
        topic="c", partition=0, offset=offset, key=b"k%d" % key, value=value, headers=headers
    )


logs = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(1, 4), st.integers(0, 4)),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(logs, st.lists(st.integers(1, 7), min_size=1, max_size=10))
def test_the_writer_ends_where_the_rule_over_the_whole_log_does(
    tmp_path: Path, spec: list[tuple[int, int, int, int]], cuts: list[int]
) -> None:
    records = [_record(n, *fields) for n, fields in enumerate(spec)]
    store = _Store(tmp_path / f"db-{abs(hash((tuple(spec), tuple(cuts))))}")
    writer = RocksdictWriter(store)
    tp = SimpleNamespace(topic="c", partition=0)
    at, step = 0, 0
    while at < len(records):
        size = cuts[step % len(cuts)]
        writer.apply(tp, records[at : at + size])
        at, step = at + size, step + 1
    expected: dict[bytes, bytes] = {}
    passed = fence(None, records)
    for record in passed.apply:
        if record.value is None:
            expected.pop(record.key, None)
        else:
            expected[record.key] = record.value
    got = {bytes(k): bytes(v) for k, v in store.db.items()}
    assert got.pop(OFFSET_KEY) == str(records[-1].offset).encode()
    assert Owner.decode(got.pop(OWNER_KEY, None)) == passed.owner
    assert writer.owner(tp) == passed.owner
    assert got == expected
    store.db.close()
