"""Per-input watermarks and a task's decision time: Flink's watermark rule, with idleness. Pure.

Each input of a task keeps its own **watermark**, the largest event time seen
on it. The task's **decision time** is the minimum of its inputs'
watermarks: everything an outcome depends on that is older than that minus
``grace`` has arrived on *every* input, whichever input the consumer happened
to fetch first. An input the runtime reports **idle** (caught up with its
partition and silent for ``max_idle_ms`` of wall time) is left out of the
minimum until its next record; when every input is idle, nothing more is
known to come and decision time is the largest watermark.

Decision time never goes back: :attr:`Watermarks.decided` is the highest
decision time reached, which is what outcomes are emitted against and what
makes a record late (:meth:`streamjoin.join.window.JoinWindow.is_late`).
When every input's own disorder is at most ``grace``, no record is ever
late: a record at ``ts`` arrives while its own input's watermark is at most
``ts + grace``, and decision time is never above that watermark unless the
input was idle.

The encoding (:meth:`Watermarks.encode`) is what the task's changelogged
state stores, so watermarks and decision time survive a crash and follow a
task to its standbys.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamjoin.join.errors import JoinError

__all__ = ["Watermarks"]

_WIDTH = 8


def _pack(value: int | None) -> bytes:
    """``None`` as 0, a time as time + 1 (event times are 0 .. 2**63 - 1)."""
    return (0 if value is None else value + 1).to_bytes(_WIDTH, "big")


def _unpack(raw: bytes) -> int | None:
    value = int.from_bytes(raw, "big")
    return None if value == 0 else value - 1


class Watermarks:
    """The watermarks of a task's inputs, which of them are idle, and the decision time."""

    def __init__(self, inputs: Sequence[str]) -> None:
        if not inputs or len(set(inputs)) != len(inputs):
            raise JoinError(f"Watermarks needs distinct input names, got {list(inputs)!r}")
        self.inputs = tuple(inputs)
        #: input -> largest event time seen on it (``None``: nothing yet)
        self.marks: dict[str, int | None] = dict.fromkeys(self.inputs)
        #: inputs left out of the minimum (caught up and silent; runtime-reported)
        self.idle: set[str] = set()
        #: the highest decision time reached (``None``: nothing decided yet)
        self.decided: int | None = None
        #: whether :attr:`decided` reflects every change so far (see :meth:`see`)
        self._settled = True

    # -- changes --------------------------------------------------------------
    def observe(self, source: str, ts: int) -> None:
        """A record at *ts* arrived on *source*: its watermark rises, it is not idle."""
        current = self.marks[source]
        if current is None or ts > current:
            self.marks[source] = ts
            self._settled = False
        if self.idle:
            self.idle.discard(source)
            self._settled = False

    def see(self, source: str, ts: int) -> int | None:
        """:meth:`observe` then :meth:`advance`, in one call: the per-record step.

        A record that raises no watermark on an input that is not idle changes
        nothing, which is most of them: it is answered without recomputing.
        """
        current = self.marks[source]
        if self._settled and current is not None and ts <= current and source not in self.idle:
            return self.decided
        self.observe(source, ts)
        return self.advance()

    def set_idle(self, source: str, idle: bool) -> None:
        """The runtime says whether *source* is idle (see the module docstring)."""
        if source not in self.marks:
            raise JoinError(f"unknown input {source!r}; inputs are {list(self.inputs)}")
        if idle:
            self.idle.add(source)
        else:
            self.idle.discard(source)
        self._settled = False

    def advance(self) -> int | None:
        """Raise :attr:`decided` to the current decision time when it is higher; return it."""
        now = self.current()
        if now is not None and (self.decided is None or now > self.decided):
            self.decided = now
        self._settled = True
        return self.decided

    # -- reading -------------------------------------------------------------
    def bound(self, source: str) -> int | None:
        """The lowest watermark of the inputs other than *source* that are not idle:
        once *source*'s watermark is there, records of *source* alone no longer
        move the decision time. ``None`` when there is no such bound (every
        other input idle, or one that has seen nothing)."""
        lowest: int | None = None
        for other, mark in self.marks.items():
            if other == source or other in self.idle:
                continue
            if mark is None:
                return None
            if lowest is None or mark < lowest:
                lowest = mark
        return lowest

    def current(self) -> int | None:
        """min(watermark of each input that is not idle); every input idle: the largest.

        ``None`` while an input that is not idle has seen nothing.
        """
        if not self.idle:  # the common case, per record: every input active
            marks = self.marks.values()
            if None in marks:
                return None
            return min(marks)  # type: ignore[type-var]
        idle = self.idle
        lowest: int | None = None
        for source, mark in self.marks.items():
            if source in idle:
                continue
            if mark is None:
                return None
            if lowest is None or mark < lowest:
                lowest = mark
        if lowest is not None:
            return lowest
        known = [m for m in self.marks.values() if m is not None]  # every input idle
        return max(known) if known else None

    # -- persistence ---------------------------------------------------------
    def encode(self) -> bytes:
        """The watermarks and the decision time (idleness is not kept: the runtime
        re-detects it after a restore)."""
        return b"".join(_pack(self.marks[s]) for s in self.inputs) + _pack(self.decided)

    @classmethod
    def decode(cls, inputs: Sequence[str], raw: bytes | None) -> Watermarks:
        """Watermarks from :meth:`encode`'s bytes (``None``: a new task).

        A single 8-byte time is a state written before per-input watermarks
        (one stream time): every input and the decision time start there.
        """
        marks = cls(inputs)
        if raw is None:
            return marks
        marks._settled = False  # set from bytes: the next see() recomputes
        if len(raw) == _WIDTH:
            legacy = int.from_bytes(raw, "big")
            marks.marks = dict.fromkeys(marks.inputs, legacy)
            marks.decided = legacy
            return marks
        if len(raw) != _WIDTH * (len(marks.inputs) + 1):
            raise JoinError(
                f"stored watermarks of {len(raw)} bytes do not fit {len(marks.inputs)} inputs"
            )
        for i, source in enumerate(marks.inputs):
            marks.marks[source] = _unpack(raw[i * _WIDTH : (i + 1) * _WIDTH])
        marks.decided = _unpack(raw[-_WIDTH:])
        return marks
