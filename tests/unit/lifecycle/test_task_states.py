"""The task state machine: its graph is the one drawn, and nothing else passes."""

from __future__ import annotations

import itertools

import pytest

from streamjoin.errors import StreamjoinError
from streamjoin.lifecycle import states
from streamjoin.lifecycle.errors import InvalidTransition
from streamjoin.lifecycle.rebalance import Assigned, RebalanceKind, Revoked
from streamjoin.lifecycle.states import TRANSITIONS, TaskState, check

S = TaskState


def test_every_state_has_its_transitions_and_closed_is_final() -> None:
    assert set(TRANSITIONS) == set(TaskState)
    assert TRANSITIONS[S.CLOSED] == frozenset()
    # every state but CLOSED can be left, and CLOSED is reachable from each
    for state in TaskState:
        if state is not S.CLOSED:
            assert S.CLOSED in TRANSITIONS[state], state


def test_an_invalid_transition_names_the_task_and_both_states() -> None:
    with pytest.raises(InvalidTransition) as caught:
        check("billing/3", S.REVOKED, S.RUNNING)
    message = str(caught.value)
    assert "billing/3" in message and "revoked" in message and "running" in message
    assert isinstance(caught.value, StreamjoinError)


def test_check_accepts_exactly_the_edges_of_the_graph() -> None:
    for before, after in itertools.product(TaskState, TaskState):
        allowed = after in TRANSITIONS[before]
        if allowed:
            check("t", before, after)
        else:
            with pytest.raises(InvalidTransition):
                check("t", before, after)


def test_the_docstring_names_every_state_and_tables_exactly_the_transitions() -> None:
    doc = states.__doc__ or ""
    for state in TaskState:
        assert f"``{state.name}``" in doc, state
    names = {state.name for state in TaskState}
    drawn = set()
    for line in doc.splitlines():
        words = line.split()
        if len(words) > 2 and words[0] in names and words[1] in names:
            drawn.add((TaskState[words[0]], TaskState[words[1]]))
    edges = {(before, after) for before, afters in TRANSITIONS.items() for after in afters}
    assert drawn == edges


def test_a_given_up_task_never_runs_again_before_it_is_closed_or_parked() -> None:
    # REVOKED (given up in a cooperative rebalance) must not resume directly
    assert S.RUNNING not in TRANSITIONS[S.REVOKED]


def test_the_rebalance_event_says_what_was_kept() -> None:
    event = Assigned(
        RebalanceKind.COOPERATIVE,
        7,
        assigned=frozenset({("a", 0), ("a", 1), ("a", 2)}),
        revoked=frozenset({("a", 3)}),
        added=frozenset({("a", 2)}),
    )
    assert event.kept == frozenset({("a", 0), ("a", 1)})
    assert not event.kind.revokes_all
    assert RebalanceKind.EAGER.revokes_all and RebalanceKind.LOST.revokes_all
    assert Revoked(RebalanceKind.LOST, frozenset()).kind.revokes_all
