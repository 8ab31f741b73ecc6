"""A task's inputs taken in step by time (streamjoin.faust.join.alignment): which
input waits, where its records are cut, and that nothing is lost or reordered."""

from __future__ import annotations

import random

from streamjoin.faust.join.alignment import bounds, take
from streamjoin.faust.join.types import LEFT, RIGHT, Chunk, Fetched


def _chunk(side: str, stamps: list[int], first: int = 0) -> Chunk:
    topic = "imps" if side == LEFT else "clicks"
    return side, [Fetched(topic, 0, first + i, b"k", b"{}", ts) for i, ts in enumerate(stamps)]


def _stamps(chunks: list[Chunk], side: str) -> list[int]:
    return [r.timestamp for s, records in chunks if s == side for r in records]


def test_only_the_input_ahead_waits_and_only_while_the_other_has_records_to_read() -> None:
    behind = {LEFT: True, RIGHT: True}
    none = {LEFT: None, RIGHT: None}
    # clicks an hour ahead of the impressions: clicks wait, up to the lead past
    # the latest impression taken (not received)
    received = {LEFT: 2_000, RIGHT: 3_601_000}
    heads = {LEFT: 1_500, RIGHT: 5_000}
    assert bounds(received, {LEFT: 1_000, RIGHT: None}, heads, behind, 10_000) == {RIGHT: 11_000}
    received = {LEFT: 3_601_000, RIGHT: 2_000}
    heads = {LEFT: 5_000, RIGHT: 1_500}
    assert bounds(received, {LEFT: None, RIGHT: 1_000}, heads, behind, 10_000) == {LEFT: 11_000}
    # within the lead: nobody waits
    received = {LEFT: 1_000, RIGHT: 11_000}
    assert bounds(received, {LEFT: 1_000, RIGHT: 1_000}, none, behind, 10_000) == {}
    # the input behind has nothing left (taken, caught up or idle): no wait
    received = {LEFT: 1_000, RIGHT: 3_601_000}
    caught_up = {LEFT: False, RIGHT: True}
    assert RIGHT not in bounds(received, {LEFT: 1_000, RIGHT: None}, none, caught_up, 10_000)
    # nothing of the other input taken yet, but it has records to read
    waits = bounds({LEFT: None, RIGHT: 5_000}, none, none, behind, 10_000)
    assert list(waits) == [RIGHT] and waits[RIGHT] < 0
    assert bounds(none, none, none, behind, 10_000) == {}


def test_when_both_would_wait_the_one_whose_next_record_is_later_does() -> None:
    behind = {LEFT: True, RIGHT: True}
    none = {LEFT: None, RIGHT: None}
    # both received, none taken yet
    received = {LEFT: 1_000, RIGHT: 5_000}
    heads = {LEFT: 0, RIGHT: 100}
    assert list(bounds(received, none, heads, behind, 0)) == [RIGHT]
    assert list(bounds(received, none, {LEFT: 100, RIGHT: 0}, behind, 0)) == [LEFT]
    # the same next record: the one received further waits; all the same: none
    assert list(bounds(received, none, {LEFT: 0, RIGHT: 0}, behind, 0)) == [RIGHT]
    assert bounds({LEFT: 5_000, RIGHT: 5_000}, none, {LEFT: 0, RIGHT: 0}, behind, 0) == {}
    # both received to their end, records of both waiting
    received = {LEFT: 60_000, RIGHT: 60_000}
    taken = {LEFT: 40_000, RIGHT: 50_000}
    heads = {LEFT: 40_020, RIGHT: 50_020}
    assert bounds(received, taken, heads, behind, 1_000) == {RIGHT: 41_000}


def test_never_both_inputs_wait() -> None:
    rng = random.Random(7)
    stamps = [None, *range(0, 100, 7)]
    for _ in range(2_000):
        received, taken, heads = (
            {LEFT: rng.choice(stamps), RIGHT: rng.choice(stamps)} for _ in range(3)
        )
        behind = {LEFT: rng.random() < 0.7, RIGHT: rng.random() < 0.7}
        assert len(bounds(received, taken, heads, behind, rng.choice([0, 5, 50]))) <= 1


def test_the_input_ahead_is_cut_at_its_bound_and_its_later_chunks_stay() -> None:
    inbox = [
        _chunk(RIGHT, [100, 200, 300, 400]),
        _chunk(LEFT, [50, 60]),
        _chunk(RIGHT, [500, 600], first=4),
        _chunk(LEFT, [70, 80], first=2),
    ]
    taken, left, capped = take(inbox, None, {RIGHT: 250})
    assert _stamps(taken, RIGHT) == [100, 200]
    assert _stamps(taken, LEFT) == [50, 60, 70, 80]
    assert _stamps(left, RIGHT) == [300, 400, 500, 600]
    assert not capped  # left for the bound, not for a limit
    # the records left keep their offsets' order, in one piece per chunk
    assert [[r.offset for r in records] for _, records in left] == [[2, 3], [4, 5]]


def test_a_limit_leaves_records_for_the_next_batch_at_once() -> None:
    inbox = [_chunk(LEFT, [1, 2, 3]), _chunk(RIGHT, [1, 2]), _chunk(LEFT, [4], first=3)]
    taken, left, capped = take(inbox, 4, {})
    assert capped
    assert [(s, len(r)) for s, r in taken] == [(LEFT, 3), (RIGHT, 1)]
    assert [(s, len(r)) for s, r in left] == [(RIGHT, 1), (LEFT, 1)]
    # a limit met exactly by the whole inbox leaves nothing and is not capped
    assert take(inbox, 6, {})[1:] == ([], False)


def test_a_chunk_the_bound_leaves_whole_is_kept_as_it_is() -> None:
    chunk = _chunk(RIGHT, [500, 600])
    taken, left, _ = take([chunk], None, {RIGHT: 100})
    assert taken == [] and left[0][1] is chunk[1]


def test_every_record_is_taken_or_left_once_in_order_whatever_the_cuts() -> None:
    rng = random.Random(38)
    for _ in range(300):
        inbox: list[Chunk] = []
        next_offset = {LEFT: 0, RIGHT: 0}
        clock = {LEFT: 0, RIGHT: 0}
        for _ in range(rng.randint(0, 6)):
            side = rng.choice([LEFT, RIGHT])
            stamps = []
            for _ in range(rng.randint(1, 8)):
                clock[side] += rng.randint(-5, 30)  # a little out of order now and then
                stamps.append(clock[side])
            inbox.append(_chunk(side, stamps, next_offset[side]))
            next_offset[side] += len(stamps)
        limit = rng.choice([None, rng.randint(0, 30)])
        waits = rng.choice([{}, {LEFT: rng.randint(-10, 100)}, {RIGHT: rng.randint(-10, 100)}])
        taken, left, capped = take(inbox, limit, waits)
        for side in (LEFT, RIGHT):
            offsets = [r.offset for s, rs in [*taken, *left] if s == side for r in rs]
            assert offsets == list(range(next_offset[side]))  # taken first, then left
        if limit is not None:
            assert sum(len(r) for _, r in taken) <= limit
        if any(s not in waits for s, _ in left):  # only a limit leaves those
            assert capped
        if capped:
            assert limit is not None and left
