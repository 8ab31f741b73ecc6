"""A join's record size limit: checked when declared, applied before decoding."""

from __future__ import annotations

import pytest

from streamjoin.ads.policy import AdAttribution
from streamjoin.faust.join.declare import check_record_limit
from streamjoin.faust.join.router import OVERSIZED_KEPT, SIZE_HEADER, RecordRouter
from streamjoin.faust.join.stats import JoinStats
from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.join.types import RIGHT, Fetched
from streamjoin.join.errors import JoinConfigError


@pytest.mark.parametrize("bad", [0, 1023, -1, 2.5, True, "1k"])
def test_a_limit_under_a_kib_or_not_an_int_is_refused_naming_the_join(bad: object) -> None:
    with pytest.raises(JoinConfigError, match="join 'billing': max_record_bytes"):
        check_record_limit("billing", bad)  # type: ignore[arg-type]


def test_a_record_over_the_limit_is_dead_lettered_before_the_policy_sees_it(
    tmp_path: object,
) -> None:
    from rocksdict import Rdict

    stats = JoinStats()
    router = RecordRouter(
        "billing", AdAttribution(), stats, {}, "billing-dead-letters", max_record_bytes=2048
    )  # fmt: skip
    task = JoinTask(0, AdAttribution(), max_idle_ms=100)
    task.open(Rdict(f"{tmp_path}/db"), 0)
    big = Fetched("clicks", 0, 7, b"a-1", b"{" + b"x" * 5000, 0)
    small = Fetched("clicks", 0, 8, b"a-1", b"{not json", 0)
    out = router.apply(task, RIGHT, [big, small])
    (topic, key, value, headers), (_, _, rest, _) = out
    assert (topic, key, value) == ("billing-dead-letters", b"a-1", big.value[:OVERSIZED_KEPT])
    named = dict(headers or [])
    assert named[SIZE_HEADER] == b"5004"
    assert named["streamjoin-reason"].startswith(b"record of 5004 bytes is over the join's limit")
    assert named["streamjoin-source"] == b"clicks:0:7"
    assert rest == small.value  # under the limit: the policy's reason, the whole value
    assert stats.bad == 2 and task.position[RIGHT] == 9
    task.state.db.close()
