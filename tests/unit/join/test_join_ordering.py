"""Event-time merging of a task's partitions, with a bounded wait for a lagging one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.join.errors import JoinConfigError
from streamjoin.join.ordering import EventTimeMerger


@given(
    st.lists(st.integers(0, 1000), max_size=30).map(sorted),
    st.lists(st.integers(0, 1000), max_size=30).map(sorted),
)
def test_with_everything_fetched_records_come_out_in_event_time_order(
    imps: list[int], clicks: list[int]
) -> None:
    merger: EventTimeMerger[int] = EventTimeMerger(["impressions", "clicks"], max_idle_ms=100)
    for ts in imps:
        merger.add("impressions", ts, ts)
    for ts in clicks:
        merger.add("clicks", ts, ts)
    out = merger.poll(0, {"impressions": False, "clicks": False})
    assert [r for _, r in out] == sorted(imps + clicks)
    assert merger.buffered() == 0 and merger.idle_expirations == 0


def test_a_backlog_on_one_topic_waits_for_the_other() -> None:
    merger: EventTimeMerger[str] = EventTimeMerger(["impressions", "clicks"], max_idle_ms=500)
    for ts in range(1000, 1010):  # the clicks backlog is far ahead
        merger.add("clicks", ts, f"click@{ts}")
    # impressions still has unread data: nothing may be released yet
    assert merger.poll(0, {"impressions": True, "clicks": False}) == []
    assert merger.poll(400, {"impressions": True, "clicks": False}) == []
    merger.add("impressions", 5, "imp@5")
    merger.add("impressions", 1003, "imp@1003")
    out = merger.poll(450, {"impressions": True, "clicks": False})
    # in event-time order, and stops again when impressions runs dry
    assert [r for _, r in out] == ["imp@5", "click@1000", "click@1001", "click@1002", "imp@1003"]
    assert merger.buffered() == 7


def test_the_wait_is_bounded_by_max_idle() -> None:
    merger: EventTimeMerger[int] = EventTimeMerger(["a", "b"], max_idle_ms=500)
    merger.add("a", 10, 10)
    merger.add("a", 20, 20)
    assert merger.poll(1_000, {"b": True}) == []
    assert merger.poll(1_499, {"b": True}) == []
    assert [r for _, r in merger.poll(1_500, {"b": True})] == [10, 20]
    assert merger.idle_expirations == 1
    # an input without unread data never holds the others back
    merger.add("a", 30, 30)
    assert [r for _, r in merger.poll(1_501, {"b": False})] == [30]


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(JoinConfigError):
        EventTimeMerger(["a", "a"], max_idle_ms=10)
    with pytest.raises(JoinConfigError):
        EventTimeMerger(["a", "b"], max_idle_ms=-1)


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 300)), max_size=12),
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 330)), max_size=20),
    st.integers(1, 5),
)
def test_a_clicks_backlog_does_not_make_impressions_late(
    imp_events: list[tuple[str, int]], click_events: list[tuple[str, int]], chunks: int
) -> None:
    """Clicks fetched far ahead of impressions: the merger keeps the join exact."""
    from streamjoin.ads.attribution import Click, Impression, TaskAttribution, attribute
    from streamjoin.join.policy import Late
    from streamjoin.join.window import JoinWindow

    window = JoinWindow(before=0, after=30, grace=5)
    imps = sorted(
        (Impression(k, f"i{n}", ts) for n, (k, ts) in enumerate(imp_events)), key=lambda i: i.ts
    )
    clicks = sorted(
        (Click(k, f"c{n}", ts) for n, (k, ts) in enumerate(click_events)), key=lambda c: c.ts
    )
    merger: EventTimeMerger[Impression | Click] = EventTimeMerger(
        ["imp", "clk"], max_idle_ms=10_000
    )
    task = TaskAttribution(window)
    outcomes = {}
    for click in clicks:  # the whole clicks backlog arrives first
        merger.add("clk", click.ts, click)
    step = max(1, len(imps) // chunks)
    for start in range(0, len(imps) + 1, step):
        for imp in imps[start : start + step]:
            merger.add("imp", imp.ts, imp)
        more = start + step < len(imps)
        for _, record in merger.poll(0, {"imp": more, "clk": False}):
            fed = (
                task.on_impression(record)
                if isinstance(record, Impression)
                else task.on_click(record)
            )
            for item in fed:
                assert not isinstance(item, Late), item
                outcomes[item.click_id] = item
    for item in task.flush():
        outcomes[item.click_id] = item  # type: ignore[union-attr]
    assert outcomes == attribute(imps, clicks, window)


def test_records_still_arriving_keep_the_wait_going_until_the_buffer_cap() -> None:
    merger: EventTimeMerger[int] = EventTimeMerger(["a", "b"], max_idle_ms=500, max_buffered=4)
    merger.add("a", 10, 10, now_ms=0)
    assert merger.poll(0, {"b": True}) == []
    merger.add("a", 20, 20, now_ms=400)  # a backlog is being drained: keep waiting
    assert merger.poll(600, {"b": True}) == []
    merger.add("a", 30, 30, now_ms=800)
    assert merger.poll(1_200, {"b": True}) == []
    merger.add("b", 15, 15, now_ms=1_250)  # the starving input delivers
    assert [r for _, r in merger.poll(1_250, {"b": True})] == [10, 15]
    for n in range(4):  # b starves again; a floods past the cap
        merger.add("a", 40 + n, 40 + n, now_ms=1_300 + n)
    assert [r for _, r in merger.poll(1_310, {"b": True})] == [20, 30, 40, 41, 42, 43]
    assert merger.idle_expirations == 1


def test_progress_elsewhere_keeps_the_wait_going() -> None:
    merger: EventTimeMerger[int] = EventTimeMerger(["a", "b"], max_idle_ms=500)
    merger.add("a", 10, 10)
    assert merger.poll(0, {"b": True}) == []
    merger.progress(450)  # records for other tasks arrived at 450
    assert merger.poll(900, {"b": True}) == []
    assert [r for _, r in merger.poll(950, {"b": True})] == [10]
