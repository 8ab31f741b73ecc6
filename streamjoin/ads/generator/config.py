"""The generator's settings: :class:`GeneratorConfig` and its checks. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from streamjoin.ads.policy import MAX_EVENT_TS, MIN_EVENT_TS
from streamjoin.ads.topics import AdTopics

__all__ = [
    "CLICKS",
    "DEFAULT_START_TS_MS",
    "IMPRESSIONS",
    "MAX_VALID_TS_MS",
    "MIN_VALID_TS_MS",
    "GeneratorConfig",
    "GeneratorConfigError",
]

#: The default topic names (no prefix), as :class:`~streamjoin.ads.topics.AdTopics` spells them.
IMPRESSIONS: Final = AdTopics().impressions
CLICKS: Final = AdTopics().clicks

#: 2026-01-01T00:00:00Z: the default start, so a seed alone reproduces a run.
DEFAULT_START_TS_MS: Final = 1_767_225_600_000
#: Valid event times are the ad policy's bounds, [2000-01-01, 2100-01-01) UTC.
MIN_VALID_TS_MS: Final = MIN_EVENT_TS
MAX_VALID_TS_MS: Final = MAX_EVENT_TS


class GeneratorConfigError(ValueError):
    """A generator setting is out of range: ``field`` names it, ``problem`` says why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate. Give exactly one of ``impressions`` and ``duration_ms``.

    Attributes:
        seed: seeds the one ``random.Random`` of a run (and appears in every id).
        impressions: generate exactly this many impressions; the span then ends
            ``jitter_ms`` after the last one.
        duration_ms: length of the event-time span ``[start_ts_ms, start_ts_ms + duration_ms)``.
            Records later than the span's end minus ``jitter_ms`` are not generated,
            so every record arrives within the span.
        rate: impressions per second of event time (Poisson arrivals).
        campaigns: number of campaigns (``camp-00`` ...), each with its own base cost.
        ctr: share of impressions that get a (first) click.
        dup_rate: share of first in-window clicks followed, a few seconds later, by
            a duplicate click on the same auction.
        orphan_rate: share of all clicks that are on an auction with no impression.
        late_click_rate: share of first clicks that come 30-45 min after their
            impression, outside a 30 min attribution window.
        jitter_ms: a record arrives up to this long after its event time.
        malformed_rate: share of all records (either topic) that are malformed.
        start_ts_ms: event time of the span's start (not before 2000-01-01).
        tail: after the span, one impression and one click per partition.
        partitions: partition count of both topics (the tail covers each one).
        tail_ms: the tail's event time is the span's end plus this.
        impressions_topic: topic name of impressions.
        clicks_topic: topic name of clicks.
    """

    seed: int = 0
    impressions: int | None = None
    duration_ms: int | None = None
    rate: float = 100.0
    campaigns: int = 8
    ctr: float = 0.2
    dup_rate: float = 0.1
    orphan_rate: float = 0.03
    late_click_rate: float = 0.02
    jitter_ms: int = 2_000
    malformed_rate: float = 0.002
    start_ts_ms: int = DEFAULT_START_TS_MS
    tail: bool = True
    partitions: int = 4
    tail_ms: int = 60_000
    impressions_topic: str = IMPRESSIONS
    clicks_topic: str = CLICKS

    def __post_init__(self) -> None:
        if (self.impressions is None) == (self.duration_ms is None):
            raise GeneratorConfigError(
                "impressions", "give exactly one of impressions and duration_ms"
            )
        _check_int("seed", self.seed, 0)
        if self.impressions is not None:
            _check_int("impressions", self.impressions, 0)
        _check_int("jitter_ms", self.jitter_ms, 0)
        if self.duration_ms is not None:
            _check_int("duration_ms", self.duration_ms, 1)
            if self.duration_ms <= self.jitter_ms:
                raise GeneratorConfigError(
                    "duration_ms",
                    f"must exceed jitter_ms ({self.jitter_ms} ms), got {self.duration_ms} ms",
                )
        _check_int("campaigns", self.campaigns, 1)
        _check_int("partitions", self.partitions, 1)
        _check_int("tail_ms", self.tail_ms, 0)
        _check_int("start_ts_ms", self.start_ts_ms, MIN_VALID_TS_MS)
        if not (isinstance(self.rate, int | float) and math.isfinite(self.rate) and self.rate > 0):
            raise GeneratorConfigError("rate", f"must be a positive number, got {self.rate!r}")
        for name in ("ctr", "dup_rate", "late_click_rate"):
            _check_share(name, getattr(self, name), upper_inclusive=True)
        for name in ("orphan_rate", "malformed_rate"):
            _check_share(name, getattr(self, name), upper_inclusive=False)
        if self.start_ts_ms + self.span_hint_ms() + self.tail_ms >= MAX_VALID_TS_MS:
            raise GeneratorConfigError("start_ts_ms", "the run would reach the year 2100")
        if not self.impressions_topic or not self.clicks_topic:
            raise GeneratorConfigError("impressions_topic", "topic names must not be empty")
        if self.impressions_topic == self.clicks_topic:
            raise GeneratorConfigError("clicks_topic", "must differ from impressions_topic")

    def span_hint_ms(self) -> int:
        """The span's length: exact for ``duration_ms``, the expected one for ``impressions``."""
        if self.duration_ms is not None:
            return self.duration_ms
        return math.ceil((self.impressions or 0) * 1000 / self.rate) + self.jitter_ms


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise GeneratorConfigError(name, f"must be an integer >= {minimum}, got {value!r}")


def _check_share(name: str, value: object, *, upper_inclusive: bool) -> None:
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and value >= 0
        and (value <= 1 if upper_inclusive else value < 1)
    )
    if not ok:
        bound = "[0, 1]" if upper_inclusive else "[0, 1)"
        raise GeneratorConfigError(name, f"must be a share in {bound}, got {value!r}")
