"""A fetched record's generation stamp across cooperative and eager rebalances
(faust's streams skip a record stamped with an older generation)."""

from __future__ import annotations

from dataclasses import dataclass

from faust.types import TP

from streamjoin.faust.kafka.incremental import Generations

KEPT, GIVEN_UP = TP("events", 0), TP("events", 1)


@dataclass
class _Message:
    tp: TP
    generation_id: int


def test_a_record_of_a_kept_partition_stays_valid_through_cooperative_rebalances() -> None:
    generations = Generations()
    generations.eager(1)
    generations.carried(2, set())
    generations.carried(3, {GIVEN_UP})
    kept, given_up = _Message(KEPT, 1), _Message(GIVEN_UP, 1)
    generations.restamp(kept)
    generations.restamp(given_up)
    assert kept.generation_id == 3  # valid now: faust's stream delivers it
    assert given_up.generation_id == 2  # stale after it was given up: skipped


def test_an_eager_rebalance_makes_every_older_record_stale() -> None:
    generations = Generations()
    generations.eager(1)
    generations.carried(2, set())
    generations.eager(3)
    message = _Message(KEPT, 1)
    generations.restamp(message)
    assert message.generation_id == 2  # not 3: the eager rebalance reads it again
    fresh = _Message(KEPT, 3)
    generations.restamp(fresh)
    assert fresh.generation_id == 3


def test_only_the_latest_generations_are_remembered() -> None:
    generations = Generations()
    generations.eager(0)
    for generation in range(1, 200):
        generations.carried(generation, set())
    old, recent = _Message(KEPT, 0), _Message(KEPT, 150)
    generations.restamp(old)
    generations.restamp(recent)
    assert old.generation_id == 0 and recent.generation_id == 199
