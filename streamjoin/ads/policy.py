"""The ad-monetization join policy: impressions ⋈ clicks → click outcomes. Pure.

Decodes the example's JSON events (schemas in ``examples/ad_monetization/README.md``),
validates them, runs :class:`~streamjoin.ads.attribution.TaskAttribution` per
task, and encodes every click's outcome as JSON keyed by ``click_id`` to one
of three outputs: ``attributed``, ``duplicate``, ``unattributed``. Late
records go to the dead-letter output with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from sys import intern
from typing import Any, NamedTuple

from streamjoin.ads.attribution import (
    Click,
    ClickOutcome,
    Impression,
    Outcome,
    TaskAttribution,
    loads,
)
from streamjoin.ads.events import fast_loads
from streamjoin.join.json_out import dumps_sorted
from streamjoin.join.policy import LEFT, BadRecord, Decoded, Emission, PolicyTask, Raw
from streamjoin.join.state import KVState
from streamjoin.join.window import JoinWindow

__all__ = [
    "ATTRIBUTION_WINDOW_MS",
    "MAX_EVENT_TS",
    "MIN_EVENT_TS",
    "AdAttribution",
    "decode_click",
    "decode_clicks",
    "decode_impression",
    "decode_impressions",
    "encode_outcome",
]

#: how long after an impression a click may bill it (the policy's default window)
ATTRIBUTION_WINDOW_MS = 30 * 60 * 1000

#: event times outside [2000-01-01, 2100-01-01) are absurd: rejected as bad input
MIN_EVENT_TS = 946_684_800_000
MAX_EVENT_TS = 4_102_444_800_000

_IMPRESSION_FIELDS = {
    "auction_id": str,
    "impression_id": str,
    "campaign": str,
    "cost": (int, float),
    "ts_ms": int,
}
_CLICK_FIELDS = {"auction_id": str, "click_id": str, "ts_ms": int}


def _fields(value: bytes | None, spec: dict[str, Any], what: str) -> dict[str, Any]:
    if value is None:
        raise BadRecord(f"{what}: empty value")
    try:
        doc = loads(value)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRecord(f"{what}: not JSON ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(doc, dict):
        raise BadRecord(f"{what}: expected a JSON object, got {type(doc).__name__}")
    for name, kind in spec.items():
        if name not in doc:
            raise BadRecord(f"{what}: missing field {name!r}")
        got = doc[name]
        if isinstance(got, bool) or not isinstance(got, kind):
            raise BadRecord(f"{what}: field {name!r} has type {type(got).__name__}")
        if isinstance(got, str) and not got:
            raise BadRecord(f"{what}: field {name!r} is empty")
    ts = doc["ts_ms"]
    if not MIN_EVENT_TS <= ts < MAX_EVENT_TS:
        raise BadRecord(f"{what}: ts_ms {ts} is outside 2000..2100")
    return doc


def _check_key(key: bytes | None, auction_id: str, what: str) -> None:
    # the join key is the record key: a record without it may sit in a
    # partition its auction's other records are not in
    if key is None:
        raise BadRecord(f"{what}: no record key (it must be its auction_id {auction_id!r})")
    if key != auction_id.encode():
        raise BadRecord(f"{what}: record key {key!r} is not its auction_id {auction_id!r}")


class _Record(NamedTuple):
    key: bytes | None
    value: bytes | None
    timestamp: int | None = None


def decode_impression(key: bytes | None, value: bytes | None) -> Impression:
    """An :class:`Impression` from the example's JSON, or :class:`BadRecord`."""
    good, bad = decode_impressions((_Record(key, value),))
    if bad:
        raise BadRecord(bad[0][1])
    return Impression(*good[0])


def decode_impressions(records: Sequence[Raw]) -> Decoded:
    """The impressions of a chunk of records: the valid ones in order, as plain
    tuples in :class:`Impression`'s field order (a tuple costs a fraction of a
    named one to make), and each bad one's index and reason.

    A valid record is recognised in one pass over its decoded object, in one
    loop for the chunk; anything else goes through the field-by-field checks,
    which name what is wrong.
    """
    return _decode(records, _impression, _checked_impression)


def _impression(doc: dict[str, Any], key: bytes) -> tuple[str, str, int, str, float] | None:
    aid = doc.get("auction_id")
    iid = doc.get("impression_id")
    campaign = doc.get("campaign")
    cost = doc.get("cost")
    ts = doc.get("ts_ms")
    if (
        type(aid) is str
        and type(iid) is str
        and type(campaign) is str
        and type(ts) is int
        and (type(cost) is float or type(cost) is int)
        and aid
        and iid
        and campaign
        and MIN_EVENT_TS <= ts < MAX_EVENT_TS
        and 0.0 <= cost < 1e9
        and key == aid.encode()
    ):
        # one string per campaign, however many impressions hold it
        return (aid, iid, ts, intern(campaign), float(cost))
    return None


def _decode(
    records: Sequence[Raw],
    recognise: Callable[[dict[str, Any], bytes], tuple[Any, ...] | None],
    checked: Callable[[bytes | None, bytes | None], tuple[Any, ...]],
) -> Decoded:
    """A chunk decoded: each record's JSON object *recognise*-d in one pass,
    or, when it is not, *checked* field by field (which raises
    :class:`BadRecord` with the reason)."""
    good: list[tuple[Any, ...]] = []
    bad: list[tuple[int, str]] = []
    keep = good.append
    for i, record in enumerate(records):
        key, value = record.key, record.value
        try:
            doc = fast_loads(value) if key is not None and value is not None else None
        except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            doc = None
        got = recognise(doc, key) if type(doc) is dict and key is not None else None
        if got is None:
            try:
                got = checked(key, value)
            except BadRecord as exc:
                bad.append((i, exc.reason))
                continue
        keep(got)
    return good, bad


def _checked_impression(key: bytes | None, value: bytes | None) -> Impression:
    doc = _fields(value, _IMPRESSION_FIELDS, "impression")
    _check_key(key, doc["auction_id"], "impression")
    cost = float(doc["cost"])
    if not 0.0 <= cost < 1e9:
        raise BadRecord(f"impression: cost {cost} is out of range")
    return Impression(doc["auction_id"], doc["impression_id"], doc["ts_ms"], doc["campaign"], cost)


def decode_click(key: bytes | None, value: bytes | None) -> Click:
    """A :class:`Click` from the example's JSON, or :class:`BadRecord`."""
    good, bad = decode_clicks((_Record(key, value),))
    if bad:
        raise BadRecord(bad[0][1])
    return Click(*good[0])


def decode_clicks(records: Sequence[Raw]) -> Decoded:
    """The clicks of a chunk of records, as :func:`decode_impressions` (plain
    tuples in :class:`Click`'s field order)."""
    return _decode(records, _click, _checked_click)


def _click(doc: dict[str, Any], key: bytes) -> tuple[str, str, int] | None:
    aid = doc.get("auction_id")
    cid = doc.get("click_id")
    ts = doc.get("ts_ms")
    if (
        type(aid) is str
        and type(cid) is str
        and type(ts) is int
        and aid
        and cid
        and MIN_EVENT_TS <= ts < MAX_EVENT_TS
        and key == aid.encode()
    ):
        return (aid, cid, ts)
    return None


def _checked_click(key: bytes | None, value: bytes | None) -> Click:
    doc = _fields(value, _CLICK_FIELDS, "click")
    _check_key(key, doc["auction_id"], "click")
    return Click(doc["auction_id"], doc["click_id"], doc["ts_ms"])


#: outcome -> its name (a look-up: an enum's ``value`` is a property)
_NAMES = {outcome: outcome.value for outcome in Outcome}


def encode_outcome(outcome: ClickOutcome) -> bytes:
    """The JSON of a click's outcome (keys sorted: byte-identical on replay)."""
    doc: dict[str, Any] = {
        "click_id": outcome.click_id,
        "auction_id": outcome.key,
        "click_ts_ms": outcome.click_ts,
        "outcome": _NAMES[outcome.outcome],
        "impression_id": outcome.impression_id,
        "campaign": outcome.campaign,
        "cost": outcome.cost if outcome.outcome is Outcome.ATTRIBUTED else 0.0,
    }
    return dumps_sorted(doc)


def _emission(outcome: ClickOutcome) -> Emission:
    return Emission(_NAMES[outcome.outcome], outcome.click_id.encode(), encode_outcome(outcome))


@dataclass(frozen=True)
class AdAttribution:
    """Policy: attribute each click to its auction's impression within ``window``.

    The same object configures the stream (this module) and the batch side.
    """

    window: JoinWindow = field(
        default_factory=lambda: JoinWindow(before=0, after=ATTRIBUTION_WINDOW_MS, grace=10_000)
    )

    @property
    def outputs(self) -> Sequence[str]:
        return tuple(o.value for o in Outcome)

    def decode_left(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> Impression:
        return decode_impression(key, value)

    def decode_right(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> Click:
        return decode_click(key, value)

    def decode_chunk(self, side: str, records: Sequence[Raw]) -> Decoded:
        return decode_impressions(records) if side == LEFT else decode_clicks(records)

    def task(self, state: KVState) -> PolicyTask[ClickOutcome]:
        # the runtime checkpoints once per batch, before the batch's input
        # positions, and settles after each chunk of records of one input
        logic = TaskAttribution(self.window, state, auto_checkpoint=False, decide_per_chunk=True)
        return PolicyTask(logic, _emission, self.window.grace)
