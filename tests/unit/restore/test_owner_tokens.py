"""The ownership fence: a zombie's writes never reach a restored state.

The model: owners take a changelog partition over one after the other; each
restores the log to its end, writes its fence marker and from then on writes
records with its token, keeping its own state in memory. Owners that lost the
partition (zombies) go on writing for a while: their records, and a marker of
theirs held back in their buffers, land anywhere after their successor took
over. Whatever the interleaving, restoring the log (from the start, or from
any point with the state and owner stored there) gives exactly the state the
live owner holds in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.restore.owner_tokens import (
    FENCE_HEADER,
    OWNER_HEADER,
    Owner,
    Ownership,
    fence,
    fence_key,
    first_owner,
)


@dataclass(frozen=True)
class Rec:
    key: bytes
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def marker(owner: Owner) -> Rec:
    return Rec(fence_key(owner.token), b"{}", ((FENCE_HEADER, owner.encode()),))


def restore(
    records: list[Rec], state: dict[bytes, bytes] | None = None, owner: Owner | None = None
) -> tuple[dict[bytes, bytes], Owner | None]:
    """Apply *records* as the store writers do: fence, then put or delete."""
    state = dict(state or {})
    fenced = fence(owner, records)
    for record in fenced.apply:
        if record.value is None:
            state.pop(record.key, None)
        else:
            state[record.key] = record.value
    return state, fenced.owner


@dataclass
class Member:
    token: bytes
    state: dict[bytes, bytes] = field(default_factory=dict)
    #: records sent but not yet on the broker (delivered late if it is frozen)
    held: list[Rec] = field(default_factory=list)


steps = st.lists(
    st.tuples(
        st.sampled_from(["take_over", "write", "zombie_write", "deliver", "hold_marker"]),
        st.integers(0, 5),
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(steps)
def test_restoring_the_log_gives_the_live_owners_state_whatever_zombies_wrote(
    actions: list[tuple[str, int, int]],
) -> None:
    log: list[Rec] = []
    owners: list[Member] = []
    live: Member | None = None
    hold_next_marker = False
    for n, (action, key, value) in enumerate(actions):
        if action == "hold_marker":
            hold_next_marker = True
        elif action == "take_over":
            if hold_next_marker and live is not None:
                # the previous owner froze with a marker of a takeover held back in
                # its buffers: it had restored no more than its successor does, so
                # the marker's epoch is at most the successor's (a tie here)
                current = restore(log)[1]
                epoch = 1 if current is None else current.epoch + 1
                live.held.append(marker(Owner(live.token, epoch)))
            hold_next_marker = False
            state, current = restore(log)
            token = n.to_bytes(4, "big") + b"tk"
            if key % 2:  # held records land between its restore and its marker
                for member in owners:
                    log.extend(member.held)
                    member.held.clear()
            # the protocol: mark one epoch above what was restored, restore on up
            # to the marker, and mark again until the log names this owner
            while True:
                log.append(
                    marker(first_owner(token) if current is None else current.successor(token))
                )
                state, current = restore(log)
                if current is not None and current.token == token:
                    break
            member = Member(token, state)
            owners.append(member)
            live = member
        elif action == "write" and live is not None:
            rec = Rec(
                b"k%d" % key, None if value == 0 else b"v%d" % value, ((OWNER_HEADER, live.token),)
            )
            log.append(rec)
            if rec.value is None:
                live.state.pop(rec.key, None)
            else:
                live.state[rec.key] = rec.value
        elif action == "zombie_write" and len(owners) >= 2:
            zombie = owners[key % (len(owners) - 1)]
            zombie.held.append(Rec(b"k%d" % value, b"z", ((OWNER_HEADER, zombie.token),)))
        elif action == "deliver":
            for member in owners:
                if member is not live:
                    log.extend(member.held)
                    member.held.clear()
    if live is None:
        return
    for member in owners:  # whatever zombies still hold lands at the end
        if member is not live:
            log.extend(member.held)
    restored, owner = restore(log)
    assert restored == live.state
    assert owner is not None and owner.token == live.token
    # a restore that starts from any stored point (state and owner) ends the same
    for cut in range(0, len(log) + 1, max(1, len(log) // 7)):
        head_state, head_owner = restore(log[:cut])
        assert restore(log[cut:], head_state, head_owner)[0] == live.state


def test_records_without_an_owner_header_are_applied_as_before() -> None:
    plain = [Rec(b"a", b"1"), Rec(b"b", b"2")]
    fenced = fence(Owner(b"t1", 3), plain)
    assert fenced.apply == plain and fenced.skipped == 0


def test_a_marker_not_above_the_current_epoch_is_stale_and_ignored() -> None:
    current = Owner(b"new", 4)
    records = [marker(Owner(b"old", 4)), Rec(b"k", b"z", ((OWNER_HEADER, b"old"),))]
    fenced = fence(current, records)
    assert fenced.owner == current and fenced.apply == []
    assert (fenced.skipped, fenced.stale_markers) == (1, 1)


def test_owner_encoding_round_trips_and_rejects_garbage() -> None:
    owner = Owner(b"\x00\x01tok", 2**40)
    assert Owner.decode(owner.encode()) == owner
    assert Owner.decode(None) is None and Owner.decode(b"short") is None


def test_a_member_keeps_tokens_only_from_one_generation_to_the_next_without_a_loss() -> None:
    made = iter([b"t1", b"t2", b"t3", b"t4", b"t5", b"t6"])
    book: Ownership[str] = Ownership(new_token=lambda: next(made))
    assert book.begin(5, ["a", "b"], losses=0) == []
    assert book.needs_marker("a") and book.token("a") is None
    book.marked("a")
    book.marked("b")
    assert (book.token("a"), book.token("b")) == (b"t1", b"t2")
    # the next generation keeps both tokens; a new partition is taken over
    assert book.begin(6, ["a", "b", "c"], losses=0) == ["a", "b"]
    assert book.token("a") == b"t1" and book.needs_marker("c")
    # a generation missed (the group went on without this member): all taken over anew
    assert book.begin(8, ["a"], losses=0) == []
    assert book.token("a") is None and book.needs_marker("a")
    book.marked("a")
    # the coordinator dropped this member in between: nothing kept either
    assert book.begin(9, ["a"], losses=1) == []
