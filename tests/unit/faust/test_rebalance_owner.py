"""The rebalance owner: faust's revoke and assign calls reach every registered join
as one typed event each, in one order (ownership, then the joins by name), and
the handover runs on faust's revoke signal (a real streamjoin app's table manager)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from faust.types import TP

import streamjoin
from streamjoin.faust.restore.tables import TableManager
from streamjoin.join.errors import JoinConfigError
from streamjoin.lifecycle.rebalance import Assigned, RebalanceKind, Revoked


class _Recorder:
    """A participant that notes every call, with the generation ownership had begun."""

    def __init__(self, name: str, calls: list[tuple[str, str, Any]], manager: TableManager):
        self.name = name
        self.calls = calls
        self.manager = manager
        self.again: set[tuple[str, int]] = set()

    def revoke(self, event: Revoked) -> None:
        self.calls.append((self.name, "revoke", event))

    async def handover(self, event: Revoked) -> None:
        self.calls.append((self.name, "handover", event))

    async def assign(self, event: Assigned) -> None:
        generation = self.manager.ownership.book.generation
        self.calls.append((self.name, "assign", (event, generation)))

    def restore_again(self) -> set[tuple[str, int]]:
        return self.again


@pytest.fixture
def app() -> Any:  # Any: a streamjoin App
    return streamjoin.App("owner-test", broker="kafka://127.0.0.1:1")


def _register(app: Any, *names: str) -> tuple[list[tuple[str, str, Any]], list[_Recorder]]:
    calls: list[tuple[str, str, Any]] = []
    manager: TableManager = app.tables
    recorders = [_Recorder(name, calls, manager) for name in names]
    for recorder in recorders:
        manager.register(recorder)
    return calls, recorders


def test_a_revoke_reaches_every_join_by_name_as_one_event_then_the_handover(app: Any) -> None:
    calls, _ = _register(app, "zeta", "alpha")
    revoked = {TP("imps", 1), TP("clicks", 1)}
    app.tables.on_partitions_revoked(revoked)
    event = Revoked(RebalanceKind.EAGER, frozenset(revoked))
    assert calls == [("alpha", "revoke", event), ("zeta", "revoke", event)]
    # faust sends its revoke signal last: each join's handover of that revoke
    asyncio.run(app.on_partitions_revoked.send(revoked))
    assert calls[2:] == [("alpha", "handover", event), ("zeta", "handover", event)]
    # a signal without a revoke before it hands nothing over
    asyncio.run(app.on_partitions_revoked.send(revoked))
    assert len(calls) == 4


def test_an_assignment_begins_the_ownership_then_reaches_each_join(app: Any) -> None:
    calls, recorders = _register(app, "billing")
    event = Assigned(
        RebalanceKind.COOPERATIVE,
        7,
        assigned=frozenset({("imps", 0), ("imps", 2)}),
        revoked=frozenset({("imps", 1)}),
        added=frozenset({("imps", 2)}),
    )
    asyncio.run(app.tables.rebalance.assign(event))
    assert calls == [("billing", "assign", (event, 7))], "ownership began generation 7 first"
    recorders[0].again = {("billing-state-changelog", 0)}
    assert app.tables.rebalance.restore_again() == {TP("billing-state-changelog", 0)}


def test_two_joins_of_one_name_are_refused(app: Any) -> None:
    _register(app, "billing")
    with pytest.raises(JoinConfigError, match="two joins are named 'billing'"):
        _register(app, "billing")
