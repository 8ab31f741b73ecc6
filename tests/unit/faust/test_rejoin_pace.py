"""The rejoin pace of the cooperative coordinator (streamjoin.faust.kafka.cooperative):
a rejoin the member asks for is sent at once (Kafka answers every member's
SyncGroup together, so nobody else is still syncing), and paced only once a
generation completed without the member (its SyncGroup failed: the embedded
broker answers followers late).

The coordinator here is a stand-in with aiokafka's surface (its steps record
their calls); the coordinator is driven as aiokafka drives it: a JoinGroup
answered sets its ``generation``, a failed SyncGroup calls
``request_rejoin()``, a completed one ``_on_join_complete``. The same rule on
the embedded broker: ``tests/integration/test_cooperative_coordinator.py``.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from streamjoin.faust.kafka import cooperative
from streamjoin.faust.kafka.cooperative import (
    MISSED_MEMORY,
    REJOIN_PACE_S,
    Cooperation,
    install_cooperative,
)

#: the pace in these tests (seconds): short, so that a paced rejoin shows quickly
PACE = 0.2


class Coordinator:
    """aiokafka's GroupCoordinator as the cooperative coordinator sees it."""

    def __init__(self) -> None:
        self._assignors: list[Any] = []
        self._subscription = SimpleNamespace(listener=None)
        self.generation = -1
        self.member_id = ""
        #: loop times of the rejoins actually requested (aiokafka's own request_rejoin)
        self.rejoins: list[float] = []
        self.completed: list[int] = []

    async def _send_req(self, request: Any) -> Any:
        raise AssertionError("no request is sent here")

    async def _on_join_prepare(self, previous_assignment: Any) -> None:
        pass

    async def _on_join_complete(
        self, generation: int, member_id: str, protocol: str, assignment: bytes
    ) -> None:
        self.completed.append(generation)

    def reset_generation(self) -> None:
        self.generation = -1
        self.request_rejoin()

    def request_rejoin(self) -> None:
        self.rejoins.append(asyncio.get_running_loop().time())


@pytest.fixture(autouse=True)
def _short_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cooperative, "REJOIN_PACE_S", PACE)


def _install() -> tuple[Coordinator, Cooperation]:
    coordinator = Coordinator()
    state = install_cooperative(SimpleNamespace(_coordinator=coordinator))
    assert state is not None
    return coordinator, state


async def _join(coordinator: Coordinator, generation: int) -> None:
    """The member's JoinGroup and SyncGroup of *generation* answered without error."""
    coordinator.generation = generation
    await coordinator._on_join_complete(generation, "m1", "faust", b"")


def _sync_fails(coordinator: Coordinator, generation: int) -> None:
    """The member's JoinGroup of *generation* answered, its SyncGroup then
    answered "rebalance in progress": aiokafka asks for a rejoin."""
    coordinator.generation = generation
    coordinator.request_rejoin()


async def _asked_at_once(coordinator: Coordinator) -> bool:
    """Ask for a rejoin; was it sent without a wait?"""
    before = len(coordinator.rejoins)
    coordinator.request_rejoin()
    return len(coordinator.rejoins) > before


def test_the_pace_is_the_one_the_docs_give() -> None:
    assert REJOIN_PACE_S == 1.2 and MISSED_MEMORY == 8


async def test_without_a_missed_generation_a_follow_up_is_sent_at_once() -> None:
    """The Kafka case: every SyncGroup answered, so the follow-up right after an
    assignment waits for nothing."""
    coordinator, state = _install()
    for generation in range(3):
        await _join(coordinator, generation)
        assert await _asked_at_once(coordinator), generation
    assert state.missed is None
    assert coordinator.completed == [0, 1, 2]


async def test_after_a_failed_sync_group_a_follow_up_waits_for_the_pace() -> None:
    coordinator, state = _install()
    await _join(coordinator, 0)
    await asyncio.sleep(PACE + 0.05)  # the member ran a while on its assignment
    _sync_fails(coordinator, 1)  # generation 1 completes without this member
    assert state.missed == 1
    assert len(coordinator.rejoins) == 1  # aiokafka's rejoin after the failure: at once
    await _join(coordinator, 2)
    assigned_at = asyncio.get_running_loop().time()
    assert not await _asked_at_once(coordinator)  # the follow-up: paced
    await asyncio.sleep(PACE + 0.1)
    assert len(coordinator.rejoins) == 2
    assert coordinator.rejoins[-1] - assigned_at >= PACE - 0.01
    # a rejoin asked for after the pace went by is sent at once
    assert await _asked_at_once(coordinator)


async def test_a_join_that_skips_a_generation_paces_too() -> None:
    """The group formed generation 1 without the member (the embedded broker
    does when the member's JoinGroup comes late): its next join is generation 2."""
    coordinator, state = _install()
    await _join(coordinator, 0)
    assert await _asked_at_once(coordinator)
    await _join(coordinator, 2)
    assert state.missed == 1
    assert not await _asked_at_once(coordinator)


async def test_a_paced_rejoin_is_dropped_when_a_rebalance_completed_meanwhile() -> None:
    coordinator, _ = _install()
    await _join(coordinator, 0)
    _sync_fails(coordinator, 1)
    await _join(coordinator, 2)
    rejoins = len(coordinator.rejoins)
    coordinator.request_rejoin()  # paced
    await _join(coordinator, 3)  # another member's rejoin: a rebalance completed first
    await asyncio.sleep(PACE + 0.1)
    assert len(coordinator.rejoins) == rejoins


async def test_the_pace_ends_after_missed_memory_rebalances_without_a_miss() -> None:
    coordinator, state = _install()
    await _join(coordinator, 0)
    _sync_fails(coordinator, 1)
    for generation in range(2, 2 + MISSED_MEMORY):
        await _join(coordinator, generation)
        assert not await _asked_at_once(coordinator), generation
    await _join(coordinator, 2 + MISSED_MEMORY)
    assert await _asked_at_once(coordinator)
    assert state.missed == 1


async def test_a_lost_membership_is_no_missed_generation_and_rejoins_at_once() -> None:
    """The coordinator reset the generation (session expired): the member
    rejoins at once, and its next join (generations later) is no miss."""
    coordinator, state = _install()
    await _join(coordinator, 0)
    coordinator.reset_generation()  # through the cooperative coordinator: membership lost
    assert state.membership_lost
    assert len(coordinator.rejoins) == 1  # at once
    assert await _asked_at_once(coordinator)
    await _join(coordinator, 5)
    assert state.missed is None and not state.membership_lost
    assert await _asked_at_once(coordinator)


async def test_the_first_join_of_a_member_whose_sync_group_failed_paces_later_rejoins() -> None:
    """A new member's first SyncGroup failed (a member of the generation
    rejoined at once): nothing to compare its first completed join with, but
    the failure itself counts."""
    coordinator, state = _install()
    _sync_fails(coordinator, 0)
    assert state.missed == 0
    await _join(coordinator, 1)
    assert not await _asked_at_once(coordinator)


async def test_a_fixed_pace_paces_every_follow_up_without_a_miss() -> None:
    """STREAMJOIN_REJOIN_PACE_MS (the embedded broker's launcher sets it): every
    rejoin the member asks for right after an assignment waits that long."""
    coordinator = Coordinator()
    state = install_cooperative(SimpleNamespace(_coordinator=coordinator), PACE)
    assert state is not None and state.fixed_pace == PACE
    await _join(coordinator, 0)
    assigned_at = asyncio.get_running_loop().time()
    assert not await _asked_at_once(coordinator)
    await asyncio.sleep(PACE + 0.1)
    assert len(coordinator.rejoins) == 1 and state.missed is None
    assert coordinator.rejoins[0] - assigned_at >= PACE - 0.01
    assert await _asked_at_once(coordinator)  # the pace went by
