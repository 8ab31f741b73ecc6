"""A task's per-campaign counts, kept as a view of its state. Pure.

Each task of the ad join counts, per campaign, the impressions it stored, the
clicks it billed and their spend (:class:`CampaignTally`). The counts are what
the state holds plus what expired: before a segment of records is deleted,
each campaign with records in it gets one *folded* record (``k<campaign>``:
its counts so far and the event time before which its records are in them).
A record older than its campaign's fold is not counted again, so the counts
read from any state a crash can leave (a fold written, some deletes cut off)
are exact. :class:`~streamjoin.ads.attribution.TaskAttribution` feeds it.
"""

from __future__ import annotations

from streamjoin.ads import keys
from streamjoin.ads.events import CampaignCounts, dump_state, loads
from streamjoin.join.state import KVState

__all__ = ["CampaignTally"]


class CampaignTally:
    """Per campaign: the folded counts, and the counts of the records held, by
    the time segment they expire with (a segment's counts fold in one step)."""

    def __init__(self, segment: int) -> None:
        #: the length of a time segment (ms), as the task's stores cut them
        self.segment = segment
        #: per campaign: [records before this time are folded, impressions,
        #: billed clicks, spend (micros)]
        self.folded: dict[str, list[int]] = {}
        #: segment start -> campaign -> [impressions, billed clicks, spend (micros)]
        #: of the records held that expire with that segment and are not folded
        self.live: dict[int, dict[str, list[int]]] = {}

    def load(self, state: KVState) -> None:
        """Start again from the folded records of *state* (the records held are
        counted by the caller, :meth:`count`)."""
        self.folded.clear()
        self.live.clear()
        for key, raw in state.scan(*keys.family_range(keys.CAMPAIGN)):
            doc = loads(raw)
            self.folded[keys.decode_campaign(key)] = [
                doc["before"],
                doc["impressions"],
                doc["billed"],
                doc["spend"],
            ]

    def count(self, campaign: str, ts: int, imps: int, billed: int, spend: int) -> None:
        """Count a record held in state that expires with the segment of *ts*,
        unless it is folded."""
        folded = self.folded.get(campaign)
        if folded is not None and ts < folded[0]:
            return
        start = ts - ts % self.segment
        segment = self.live.get(start)
        if segment is None:
            segment = self.live[start] = {}
        live = segment.get(campaign)
        if live is None:
            segment[campaign] = [imps, billed, spend]
        else:
            live[0] += imps
            live[1] += billed
            live[2] += spend

    def expire(self, cut: int) -> dict[str, list[int]]:
        """The counts of the records before *cut* (a segment start), which expire
        now, per campaign; they are no longer held (:meth:`fold` them)."""
        return _summed([self.live.pop(start) for start in sorted(s for s in self.live if s < cut)])

    def fold(self, delta: dict[str, list[int]], before: int, state: KVState) -> None:
        """Fold *delta*, the counts of the records before *before* that expire
        now (:meth:`expire`), and write each campaign's folded record to
        *state* (before the records' deletes: see the module docstring)."""
        for campaign, (imps, billed, spend) in sorted(delta.items()):
            folded = self.folded.setdefault(campaign, [-1, 0, 0, 0])
            folded[0] = before
            folded[1] += imps
            folded[2] += billed
            folded[3] += spend
            doc = {"before": before, "impressions": folded[1], "billed": folded[2]}
            state.put(keys.campaign_key(campaign), dump_state({**doc, "spend": folded[3]}))

    def counts(self) -> dict[str, CampaignCounts]:
        """Per campaign, folded plus held: impressions, billed clicks, spend."""
        held = _summed([self.live[start] for start in sorted(self.live)])
        out = {}
        for campaign in sorted({*self.folded, *held}):
            folded = self.folded.get(campaign, [-1, 0, 0, 0])
            live = held.get(campaign, [0, 0, 0])
            out[campaign] = CampaignCounts(
                folded[1] + live[0], folded[2] + live[1], (folded[3] + live[2]) / 1_000_000
            )
        return out


def _summed(segments: list[dict[str, list[int]]]) -> dict[str, list[int]]:
    """Per campaign, the counts of *segments* (each campaign -> [impressions,
    billed clicks, spend]) added up."""
    total: dict[str, list[int]] = {}
    for segment in segments:
        for campaign, (imps, billed, spend) in segment.items():
            add = total.setdefault(campaign, [0, 0, 0])
            add[0] += imps
            add[1] += billed
            add[2] += spend
    return total
