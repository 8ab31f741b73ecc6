"""Who owns a changelog partition, written into the changelog itself.

A member frozen past its session (GC pause, VM migration, SIGSTOP) and then
thawed is a *zombie* until it rejoins: the group gave its tasks to another
member meanwhile, and whatever it still writes to a task's changelog must not
count. Kafka fences zombies of transactional producers on the broker; without
transactions the changelog has to say it. So (the epochs of KIP-315, as records):

* A member that takes over a fenced changelog partition (one it did not own
  without interruption since the previous generation) restores it to the end
  of the log, then writes a **fence marker**: a record with a key of its own
  (:func:`fence_key`, never compacted away) and the header
  :data:`FENCE_HEADER` holding a fresh random *token* and an *epoch* one above
  the highest epoch of the markers it restored. It restores on up to its
  marker, so its state is everything written before the marker.
* Every record it writes to the partition afterwards carries
  :data:`OWNER_HEADER` with its token.
* Whoever applies the changelog (an active restoring, a standby following)
  keeps the owner of the latest marker applied so far (:class:`Owner`), and
  (:func:`fence`):

  - applies a marker only when its epoch is above the current owner's: a
    marker delayed in a frozen member's buffers and delivered after its
    successor's carries an epoch no higher than the successor's (the frozen
    member restored a prefix of what its successor restored);
  - **skips every record whose owner header names another token than the
    current owner's**: a zombie's writes reach the broker after its
    successor's marker, so they are read after it and skipped;
  - applies records without the header (faust's own tables, older data).

  The current owner is stored beside the local data (:data:`OWNER_KEY`), so a
  restore that starts from the local offset knows it.

:class:`Ownership` is one member's book of its tokens across rebalances: which
partitions it kept without interruption (same token, no marker) and which it
must mark once restored.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

__all__ = [
    "APPLY",
    "FENCE_HEADER",
    "FENCE_KEY_PREFIX",
    "MARKER",
    "OWNER_HEADER",
    "OWNER_KEY",
    "SKIP",
    "STALE_MARKER",
    "Fenced",
    "Owner",
    "Ownership",
    "fence",
    "fence_key",
    "first_owner",
    "judge",
]

#: header of every record a fenced writer sends: its token
OWNER_HEADER = "streamjoin-owner"
#: header of a fence marker: the token of the owner from this record on
FENCE_HEADER = "streamjoin-fence"
#: keys of fence markers start with this (one key per token: never compacted away)
FENCE_KEY_PREFIX = b"__streamjoin\x00fence\x00"
#: local store key holding the token of the latest marker applied
OWNER_KEY = b"__streamjoin\x00owner__"


def fence_key(token: bytes) -> bytes:
    """The changelog key of *token*'s fence marker."""
    return FENCE_KEY_PREFIX + token


@dataclass(frozen=True)
class Owner:
    """The owner a fence marker names: its token and the marker's epoch."""

    token: bytes
    epoch: int

    def encode(self) -> bytes:
        """The marker header's value (and the local store's): token, then 8-byte epoch."""
        return self.token + self.epoch.to_bytes(8, "big")

    @classmethod
    def decode(cls, raw: bytes | None) -> Owner | None:
        """The owner of a marker header or local value; ``None`` for none or a bad one."""
        if raw is None or len(raw) <= 8:
            return None
        raw = bytes(raw)
        return cls(raw[:-8], int.from_bytes(raw[-8:], "big"))

    def successor(self, token: bytes) -> Owner:
        """The owner a member taking over from this one marks: *token*, next epoch."""
        return Owner(token, self.epoch + 1)


def first_owner(token: bytes) -> Owner:
    """The owner a member marks on a partition with no marker yet."""
    return Owner(token, 1)


class Headed(Protocol):
    """A changelog record as the fence reads it (aiokafka's ``ConsumerRecord`` has it)."""

    @property
    def headers(self) -> Sequence[tuple[str, bytes]]: ...


R = TypeVar("R", bound=Headed)


@dataclass(frozen=True)
class Fenced(Generic[R]):
    """What :func:`fence` made of a run of records."""

    #: the records to apply (markers and other owners' records left out)
    apply: list[R]
    #: the owner after the run (``None``: no marker seen yet)
    owner: Owner | None
    #: records skipped because another owner wrote them after a marker
    skipped: int
    #: markers left out because their epoch was not above the current owner's
    stale_markers: int


#: what :func:`judge` says of one record
APPLY, SKIP, MARKER, STALE_MARKER = 0, 1, 2, 3


def judge(owner: Owner | None, headers: Sequence[tuple[str, bytes]]) -> tuple[int, Owner | None]:
    """The ownership rule for one record with *headers* (not empty), read when
    *owner* is current: ``(verdict, owner after it)``.

    A marker whose epoch is above the current owner's makes its owner current
    (:data:`MARKER`), any other is :data:`STALE_MARKER`; neither is applied to
    the data. A record whose owner header names another token than the
    current owner's is :data:`SKIP`; every other record is :data:`APPLY`.
    """
    marker = writer = None
    for name, value in headers:
        if name == FENCE_HEADER:
            marker = value
        elif name == OWNER_HEADER:
            writer = value
    if marker is not None:
        named = Owner.decode(marker)
        if named is not None and (owner is None or named.epoch > owner.epoch):
            return MARKER, named
        return STALE_MARKER, owner
    if writer is not None and owner is not None and writer != owner.token:
        return SKIP, owner
    return APPLY, owner


def fence(owner: Owner | None, records: Sequence[R]) -> Fenced[R]:
    """Apply the ownership rule (:func:`judge`) to *records* (one partition,
    offset order); *owner* is the owner of the latest marker applied before
    them (``None``: none known)."""
    keep: list[R] = []
    skipped = stale = 0
    for record in records:
        headers = record.headers
        if headers:
            verdict, owner = judge(owner, headers)
            if verdict != APPLY:
                skipped += verdict == SKIP
                stale += verdict == STALE_MARKER
                continue
        keep.append(record)
    return Fenced(keep, owner, skipped, stale)


K = TypeVar("K", bound=Hashable)


@dataclass
class Ownership(Generic[K]):
    """One member's tokens of the fenced changelog partitions it owns.

    Arguments:
        new_token: makes a fresh random token (the adapter passes ``os.urandom``).
    """

    new_token: Callable[[], bytes]
    #: partition -> token, for the partitions whose marker is acknowledged
    tokens: dict[K, bytes] = field(default_factory=dict)
    #: partition -> token, for the partitions whose marker is still to be written
    pending: dict[K, bytes] = field(default_factory=dict)
    #: the generation and lease losses seen at the last rebalance
    generation: int | None = None
    losses: int = 0

    def begin(self, generation: int, owned: Iterable[K], losses: int) -> list[K]:
        """A rebalance gave this member *owned* in *generation*; returns the
        partitions kept without interruption (they keep their token).

        Ownership is uninterrupted only from one generation to the next one
        (a gap means the group went on without this member) and without a
        lease loss in between (the coordinator dropped this member). Every
        other owned partition gets a new token, pending until its marker is
        written (:meth:`marked`).
        """
        continuous = (
            self.generation is not None
            and generation == self.generation + 1
            and losses == self.losses
        )
        self.generation = generation
        self.losses = losses
        wanted = sorted(set(owned), key=repr)
        previous = self.tokens if continuous else {}
        self.tokens = {k: previous[k] for k in wanted if k in previous}
        self.pending = {k: self.new_token() for k in wanted if k not in self.tokens}
        return sorted(self.tokens, key=repr)

    def marked(self, partition: K) -> bytes | None:
        """The marker of *partition* is acknowledged: its token is now current."""
        token = self.pending.pop(partition, None)
        if token is not None:
            self.tokens[partition] = token
        return token

    def needs_marker(self, partition: K) -> bool:
        """Is *partition* taken over, its marker still to be written?"""
        return partition in self.pending

    def token(self, partition: K) -> bytes | None:
        """The token this member writes *partition* with (``None``: not its own now)."""
        return self.tokens.get(partition)
