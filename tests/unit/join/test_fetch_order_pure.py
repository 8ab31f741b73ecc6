"""A fetch request lists the partitions with the fewest records behind first."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamjoin.join.fetch_order import least_behind_first

KIB = 1024


def _behind(ends: dict[tuple[str, int], int]):
    return lambda topic, partition, offset: ends.get((topic, partition), offset) - offset


def test_a_caught_up_partition_comes_before_a_backlog_and_its_topic_before_the_other() -> None:
    # after a takeover: the taken-over task's partitions (1) are far behind, the
    # kept task's (0) nearly caught up; impressions have the larger backlog
    topics = [
        ("imps", [(1, 10_000, 256 * KIB), (0, 50_000, 256 * KIB)]),
        ("clicks", [(1, 1_000, 256 * KIB), (0, 4_000, 256 * KIB)]),
    ]
    ends = {("imps", 1): 42_000, ("imps", 0): 50_012, ("clicks", 1): 3_800, ("clicks", 0): 4_003}
    assert least_behind_first(topics, _behind(ends)) == [
        ("clicks", [(0, 4_000, 256 * KIB), (1, 1_000, 256 * KIB)]),
        ("imps", [(0, 50_000, 256 * KIB), (1, 10_000, 256 * KIB)]),
    ]


def test_unknown_or_stale_high_watermarks_count_as_caught_up_and_ties_go_by_number() -> None:
    # a partition never fetched (no high watermark: 0 behind), and one whose
    # offset passed the high watermark last seen (never negative)
    topics = [("b", [(3, 7, 1), (2, 9, 1)]), ("a", [(5, 0, 1)])]
    behind = {("b", 3): 0, ("b", 2): -4, ("a", 5): 0}
    assert least_behind_first(topics, lambda t, p, o: behind[(t, p)]) == [
        ("a", [(5, 0, 1)]),
        ("b", [(2, 9, 1), (3, 7, 1)]),
    ]


@given(
    st.dictionaries(
        st.tuples(st.sampled_from("xyz"), st.integers(0, 7)),
        st.tuples(st.integers(0, 1_000), st.integers(-5, 1_000)),
        max_size=12,
    )
)
def test_the_order_keeps_every_partition_once_sorted_by_records_behind(
    parts: dict[tuple[str, int], tuple[int, int]],
) -> None:
    topics: dict[str, list[tuple[int, int, int]]] = {}
    for (topic, partition), (offset, _) in parts.items():
        topics.setdefault(topic, []).append((partition, offset, 1))
    ordered = least_behind_first(list(topics.items()), lambda t, p, o: parts[(t, p)][1])
    assert sorted((t, p) for t, ps in ordered for p, _, _ in ps) == sorted(parts)
    totals = []
    for topic, partitions in ordered:
        lags = [max(0, parts[(topic, p)][1]) for p, _, _ in partitions]
        assert lags == sorted(lags)
        totals.append(sum(lags))
    assert totals == sorted(totals)
