"""The session lease: a member writes only while the coordinator cannot have expired it."""

from __future__ import annotations

import pytest

from streamjoin.membership.lease import SessionLease


def test_a_lease_runs_from_the_send_time_of_the_latest_renewal() -> None:
    lease = SessionLease(6.0, margin=2.0)
    assert not lease.valid(0.0)  # never renewed: not a member yet
    lease.renew(10.0)
    assert lease.valid(13.9) and not lease.valid(14.0)
    lease.renew(9.0)  # an older request answered late renews nothing
    assert lease.expires_at() == 14.0
    lease.renew(12.5)
    assert lease.valid(16.4) and not lease.valid(16.5)


def test_a_frozen_member_finds_its_lease_run_out_when_it_thaws() -> None:
    lease = SessionLease(6.0)
    lease.renew(100.0)
    # SIGSTOPped at 100.2 for 15 s: the first thing it checks after SIGCONT
    assert not lease.valid(115.2)


def test_a_loss_ends_the_lease_until_a_new_renewal_and_is_counted() -> None:
    lease = SessionLease(6.0)
    lease.renew(1.0)
    lease.lose()
    assert not lease.valid(2.0) and lease.losses == 1
    lease.renew(3.0)
    assert lease.valid(4.0) and lease.losses == 1


def test_the_margin_is_at_most_a_third_of_the_session() -> None:
    assert SessionLease(3.0, margin=2.0).margin == 1.0
    with pytest.raises(ValueError, match="session_timeout must be positive"):
        SessionLease(0)


def test_a_join_or_sync_sent_under_a_valid_lease_renews_it_when_sent() -> None:
    """The coordinator holds a JoinGroup for seconds and keeps the member alive
    meanwhile: the lease runs from the send time, not from the answer."""
    lease = SessionLease(6.0, margin=2.0)
    lease.renew(10.0)  # a heartbeat sent at 10.0, answered
    assert lease.renew_on_send(13.5)  # JoinGroup out at 13.5, held until 16.6
    assert lease.valid(16.6) and lease.expires_at() == 17.5
    # a worker frozen before it sent its JoinGroup renews nothing by sending it
    assert not lease.renew_on_send(20.0) and not lease.valid(20.0)
    lease.lose()
    assert not lease.renew_on_send(20.5)  # a rejoin after a loss waits for its answer
    assert lease.renewed_at is None


def test_a_join_or_sync_answered_after_the_lease_ran_out_counts_as_a_loss() -> None:
    """Seen on the embedded broker: a worker frozen past its lease sent its
    JoinGroup on thawing; the group went on without it (its tasks fenced by
    another worker), then the broker answered that JoinGroup under the old
    member id. The answer may not make the old tasks the worker's again."""
    lease = SessionLease(6.0, margin=2.0)
    lease.renew(10.0)
    # sent while valid (renewed on send), answered: a plain renewal
    assert lease.renew_on_send(12.0)
    assert not lease.rejoined(12.0)
    assert lease.losses == 0 and lease.expires_at() == 16.0
    # frozen until 20.0, then a JoinGroup: it renews nothing when sent ...
    assert not lease.renew_on_send(20.0)
    assert lease.rejoined(20.0)  # ... and its answer is a loss, then a new lease
    assert lease.losses == 1 and lease.valid(23.9)
    # a heartbeat answered after a lapse says the member stayed: no loss
    lease.renew(30.0)
    assert lease.losses == 1 and lease.valid(33.0)
    # the first JoinGroup of a member that never had a lease is no loss
    first = SessionLease(6.0)
    assert not first.rejoined(1.0)
    assert first.losses == 0 and first.valid(2.0)
