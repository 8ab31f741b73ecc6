"""A member's session lease: how long it may still act as the owner of its tasks.

The group coordinator expires a member whose session it has not renewed for
``session_timeout`` seconds (a heartbeat, JoinGroup or SyncGroup renews it),
and then gives the member's tasks to someone else. A member that was frozen
(a long GC pause, a VM migration, SIGSTOP) does not know it was expired until
its next heartbeat is answered, and the code that runs first after it thaws
may well be a batch that writes outputs and changelog records for tasks that
are no longer its own.

The lease bounds that from the member's side. The coordinator renewed the
session no earlier than the moment the renewing request was *sent*, so the
session cannot have expired before ``sent + session_timeout``. A member acts
as owner only while ``now < sent + session_timeout - margin`` for the latest
renewal; the margin covers the time between the check and the bytes reaching
the broker. A JoinGroup or SyncGroup sent while the lease is valid renews
it as soon as it is sent: the coordinator cannot have expired the member before the
request reached it (that is what the margin covers), it keeps a member
whose JoinGroup or SyncGroup it holds (Kafka keeps a member awaiting a join
or a sync alive; the embedded broker renews its last contact every second
it holds one) and restarts the session when it answers, so the session
lasts at least until ``sent + session_timeout`` however long the request is
held (:meth:`SessionLease.renew_on_send`). A heartbeat renews on its answer
only. Without this, a member whose JoinGroup the coordinator holds for
longer than the margin (the embedded broker holds every one for half the
session) would stop writing in every rebalance although nothing can
expire it. Once the coordinator answered that the member is unknown or its
generation is not current, the lease is lost until the next renewal of a new
membership (:meth:`SessionLease.lose`); a JoinGroup or SyncGroup sent after
the lease had run out and answered without error counts as a loss too (the
member may have been expired and taken back meanwhile,
:meth:`SessionLease.rejoined`); a heartbeat answered without error says the
member stayed in its generation and only renews. :attr:`SessionLease.losses`
counts the losses, so a caller can tell whether its tasks may have had
another owner since it last looked.

Written by the consumer's thread, read by the event loop's: every field is
replaced in one assignment.
"""

from __future__ import annotations

__all__ = ["SessionLease"]


class SessionLease:
    """The time up to which this member may write for its tasks (monotonic seconds).

    Arguments:
        session_timeout: the group's session timeout, in seconds.
        margin: seconds given up at the end of every lease (at most a third
            of the session timeout is used).
    """

    def __init__(self, session_timeout: float, margin: float = 2.0) -> None:
        if session_timeout <= 0:
            raise ValueError(f"session_timeout must be positive, got {session_timeout!r}")
        self.session_timeout = float(session_timeout)
        self.margin = min(float(margin), self.session_timeout / 3)
        #: monotonic time the latest renewing request was sent; ``None``: never renewed
        self.renewed_at: float | None = None
        #: times the coordinator said this member's session or generation was gone
        self.losses = 0

    def renew(self, sent_at: float) -> None:
        """A renewing request sent at *sent_at* was answered without error."""
        if self.renewed_at is None or sent_at > self.renewed_at:
            self.renewed_at = sent_at

    def renew_on_send(self, sent_at: float) -> bool:
        """A JoinGroup or SyncGroup goes out at *sent_at*: it renews the lease
        now if the lease is still valid then (see the module's docstring);
        returns whether it did."""
        if not self.valid(sent_at):
            return False
        self.renew(sent_at)
        return True

    def rejoined(self, sent_at: float) -> bool:
        """A JoinGroup or SyncGroup sent at *sent_at* was answered without error.

        Sent after the lease had run out, it may have made the member a member
        anew: the coordinator may have expired it meanwhile and given its tasks
        to others (Kafka answers such a member "unknown", the embedded broker
        was seen to take it back under its old id, its tasks already another
        member's). That counts as a loss; then the answer renews the lease.
        Returns whether it was a loss.
        """
        lost = self.renewed_at is not None and not self.valid(sent_at)
        if lost:
            self.losses += 1
        self.renew(sent_at)
        return lost

    def lose(self) -> None:
        """The coordinator answered that this member or its generation is gone."""
        self.renewed_at = None
        self.losses += 1

    def expires_at(self) -> float | None:
        """Monotonic time after which the member must not write (``None``: no lease)."""
        if self.renewed_at is None:
            return None
        return self.renewed_at + self.session_timeout - self.margin

    def valid(self, now: float) -> bool:
        """May the member still write for the tasks of its current generation?"""
        expires = self.expires_at()
        return expires is not None and now < expires
