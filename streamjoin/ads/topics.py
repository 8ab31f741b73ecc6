"""The ad-monetization topic names: the one place they are written.

The join app, the archive app, the demo, the generator, the benchmarks and
the docker topic script all take their names from :class:`AdTopics`.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamjoin.ads.attribution import Outcome

__all__ = ["OUTCOME_KINDS", "AdTopics"]

#: the ad policy's outcome kinds, in the order reports show them
OUTCOME_KINDS: tuple[str, ...] = tuple(o.value for o in Outcome)


@dataclass(frozen=True)
class AdTopics:
    """Every topic the ad-monetization app reads or writes, under one *prefix*."""

    prefix: str = ""

    @property
    def impressions(self) -> str:
        return f"{self.prefix}impressions"

    @property
    def clicks(self) -> str:
        return f"{self.prefix}clicks"

    @property
    def dead_letters(self) -> str:
        return f"{self.prefix}ads-dead-letters"

    def outcome(self, kind: str) -> str:
        """The topic of one outcome kind (``attributed``, ``duplicate``, ``unattributed``)."""
        if kind not in OUTCOME_KINDS:
            raise ValueError(f"unknown outcome kind {kind!r}; expected one of {OUTCOME_KINDS}")
        return f"{self.prefix}{kind}-clicks"

    @property
    def outputs(self) -> dict[str, str]:
        """Outcome kind → topic, as ``app.join(outputs=...)`` takes it."""
        return {kind: self.outcome(kind) for kind in OUTCOME_KINDS}

    @property
    def outcomes(self) -> tuple[str, ...]:
        return tuple(self.outcome(kind) for kind in OUTCOME_KINDS)

    @property
    def inputs(self) -> tuple[str, str]:
        return (self.impressions, self.clicks)

    @property
    def all(self) -> tuple[str, ...]:
        """Inputs, outcomes and dead letters: what a deployment creates up front."""
        return (*self.inputs, *self.outcomes, self.dead_letters)
