"""The ad join's records and outcomes, their JSON, and the reference attribution. Pure.

:mod:`streamjoin.ads.attribution` runs the join per task over these types; the
batch side (Spark), the archive, the reconciliation and the tests build and
compare them. :func:`attribute` is the reference: every click's outcome
computed directly from all events, with the rules of the module docstring of
:mod:`streamjoin.ads.attribution`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, NamedTuple

try:  # a faster JSON codec for the state's values and the inputs (a dependency)
    import orjson as _orjson
except ImportError:  # pragma: no cover - the json module does the same, slower
    _orjson = None  # type: ignore[assignment]

from streamjoin.join.window import JoinWindow

__all__ = [
    "CampaignCounts",
    "Click",
    "ClickOutcome",
    "Impression",
    "Outcome",
    "attribute",
    "dump_state",
    "fast_loads",
    "loads",
    "micros",
    "outcome_from_state",
]


class CampaignCounts(NamedTuple):
    """What a task (or a worker, summed) counted for one campaign."""

    impressions: int
    billed_clicks: int
    spend: float


class Impression(NamedTuple):
    """An impression (the left input). Records are named tuples: made per input
    record, they cost a fraction of a frozen dataclass."""

    key: str
    impression_id: str
    ts: int
    campaign: str = ""
    cost: float = 0.0


class Click(NamedTuple):
    """A click (the right input)."""

    key: str
    click_id: str
    ts: int


class Outcome(StrEnum):
    ATTRIBUTED = "attributed"
    DUPLICATE = "duplicate"
    UNATTRIBUTED = "unattributed"


class ClickOutcome(NamedTuple):
    """The final outcome of one click (keyed by ``click_id``)."""

    click_id: str
    key: str
    click_ts: int
    outcome: Outcome
    impression_id: str | None = None
    campaign: str | None = None
    cost: float | None = None


def micros(cost: object) -> int:
    """A cost in millionths: sums that do not depend on the order of additions."""
    return round(float(cost) * 1_000_000) if isinstance(cost, int | float) else 0


def loads(raw: bytes | str) -> Any:
    """JSON decoded by orjson when it is installed, else by :mod:`json`.

    A document orjson rejects is given to :mod:`json`, which accepts a little
    more (``NaN``, integers beyond 64 bits, lone surrogates): either way the
    result is what :func:`json.loads` returns, or its error.
    """
    if _orjson is not None:
        try:
            return _orjson.loads(raw)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(raw)


#: the fastest JSON decoder at hand (orjson's, which rejects a little of what
#: :func:`loads` accepts: a caller falls back to :func:`loads` on its error)
fast_loads: Callable[[bytes], Any] = _orjson.loads if _orjson is not None else json.loads


def dump_state(value: object) -> bytes:
    """Compact JSON of a state value (orjson's when installed: the same
    document, so either reads what the other wrote)."""
    if _orjson is not None:
        return _orjson.dumps(value)
    return json.dumps(value, separators=(",", ":")).encode()


#: outcome name -> outcome (a look-up: an enum call costs several times more)
_OUTCOMES = {outcome.value: outcome for outcome in Outcome}


def outcome_from_state(key: str, ts: int, click_id: str, value: dict[str, object]) -> ClickOutcome:
    name = value["o"]
    kind = _OUTCOMES.get(name) if type(name) is str else None
    if kind is None:
        kind = Outcome(str(name))  # raises the enum's error
    if kind is Outcome.UNATTRIBUTED:
        return ClickOutcome(click_id, key, ts, kind)
    cost = value["cost"]
    return ClickOutcome(
        click_id,
        key,
        ts,
        kind,
        str(value["imp"]),
        str(value["campaign"]),
        float(cost) if isinstance(cost, int | float) else None,
    )


def attribute(
    impressions: Iterable[Impression], clicks: Iterable[Click], window: JoinWindow
) -> dict[str, ClickOutcome]:
    """The reference: every click's outcome computed directly from all events.

    Same rules as :class:`TaskAttribution`, no ordering, no state: what a batch
    job (and the tests) compare the stream against.
    """
    by_key: dict[str, list[Impression]] = {}
    for imp in impressions:
        by_key.setdefault(imp.key, []).append(imp)
    billed: set[str] = set()
    out: dict[str, ClickOutcome] = {}
    for click in sorted(clicks, key=lambda c: (c.ts, c.click_id)):
        matching = [i for i in by_key.get(click.key, ()) if window.matches(i.ts, click.ts)]
        if not matching:
            out[click.click_id] = ClickOutcome(
                click.click_id, click.key, click.ts, Outcome.UNATTRIBUTED
            )
            continue
        imp = min(matching, key=lambda i: (i.ts, i.impression_id))
        kind = Outcome.DUPLICATE if imp.impression_id in billed else Outcome.ATTRIBUTED
        billed.add(imp.impression_id)
        out[click.click_id] = ClickOutcome(
            click.click_id, click.key, click.ts, kind, imp.impression_id, imp.campaign, imp.cost
        )
    return out
