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
    """Per campaign: the folded counts, and the counts of the records held."""

    def __init__(self) -> None:
        #: per campaign: [records before this time are folded, impressions,
        #: billed clicks, spend (micros)]
        self.folded: dict[str, list[int]] = {}
        #: per campaign: [impressions, billed clicks, spend (micros)] of the records
        #: held that are not folded
        self.live: dict[str, list[int]] = {}

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
        """Count a record held in state at event time *ts*, unless it is folded."""
        folded = self.folded.get(campaign)
        if folded is not None and ts < folded[0]:
            return
        live = self.live.get(campaign)
        if live is None:
            self.live[campaign] = [imps, billed, spend]
        else:
            live[0] += imps
            live[1] += billed
            live[2] += spend

    def note(
        self,
        delta: dict[str, list[int]],
        campaign: str,
        ts: int,
        imps: int,
        billed: int,
        spend: int,
    ) -> None:
        """Add an expiring record's counts to *delta* (campaign -> counts), unless
        it is folded already."""
        folded = self.folded.get(campaign)
        if folded is not None and ts < folded[0]:
            return
        add = delta.setdefault(campaign, [0, 0, 0])
        add[0] += imps
        add[1] += billed
        add[2] += spend

    def fold(self, delta: dict[str, list[int]], before: int, state: KVState) -> None:
        """Fold *delta*, the counts of the records before *before* that expire now,
        and write each campaign's folded record to *state* (before the records'
        deletes: see the module docstring)."""
        for campaign, (imps, billed, spend) in sorted(delta.items()):
            folded = self.folded.setdefault(campaign, [-1, 0, 0, 0])
            folded[0] = before
            folded[1] += imps
            folded[2] += billed
            folded[3] += spend
            live = self.live[campaign]
            live[0] -= imps
            live[1] -= billed
            live[2] -= spend
            doc = {"before": before, "impressions": folded[1], "billed": folded[2]}
            state.put(keys.campaign_key(campaign), dump_state({**doc, "spend": folded[3]}))

    def counts(self) -> dict[str, CampaignCounts]:
        """Per campaign, folded plus held: impressions, billed clicks, spend."""
        out = {}
        for campaign in sorted({*self.folded, *self.live}):
            folded = self.folded.get(campaign, [-1, 0, 0, 0])
            live = self.live.get(campaign, [0, 0, 0])
            out[campaign] = CampaignCounts(
                folded[1] + live[0], folded[2] + live[1], (folded[3] + live[2]) / 1_000_000
            )
        return out
