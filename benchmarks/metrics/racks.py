"""Cross-rack figures of one assignment output, from the document and the output alone.

A task (partition ``p`` of a co-partitioned group, as :mod:`.tasks` groups them) reads
partition ``p`` of every topic of its group: inputs and changelogs alike.  A partition
**crosses racks** when the rack of the task's active member holds none of its replicas
(``partition_racks`` of the group-state document: per topic, per partition, the racks
of its replicas).  A member without a rack is in no rack: every partition it reads with
known racks crosses.  Partitions with no known racks (a topic left out, an empty list)
never count, nor do partitions of weight 0.

* ``cross_rack_tasks``: tasks with at least one crossing partition;
* ``cross_rack_traffic``: crossing partitions summed over all tasks, each weighted by
  ``partition_weights`` (1 where not given);
* ``rack_tasks``: tasks with at least one partition of known racks (what could cross);
* ``no_local_member``: tasks for which no eligible member sits in a rack holding a
  replica of every one of their partitions (they cross wherever they run; balance can
  force more).

Nothing here knows either assignor: streamjoin's and faust's outputs are judged by the
same code (faust ignores racks; streamjoin reports its own count in
``stats["cross_rack_tasks"]``, which this must agree with).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.metrics.tasks import Layout, Output, Placement, layout, placement

#: the figures :func:`cross_rack` returns
FIGURES = ("cross_rack_tasks", "cross_rack_traffic", "rack_tasks", "no_local_member")


def has_racks(document: Mapping[str, Any]) -> bool:
    """Whether ``document`` gives any partition's replica racks."""
    return any(any(rows) for rows in (document.get("partition_racks") or {}).values())


def cross_rack(
    document: Mapping[str, Any], lay: Layout | None = None, now: Placement | None = None,
    *, output: Output | None = None,
) -> dict[str, int]:
    """The cross-rack figures of an output of ``document`` (see the module docstring).

    Pass the output (``output=``), or its :class:`~.tasks.Placement` ``now`` and the
    document's :class:`~.tasks.Layout` ``lay`` when they were built already.
    """
    if lay is None:
        lay = layout(document)
    if now is None:
        if output is None:
            raise TypeError("cross_rack needs the output or its placement")
        now = placement(lay, output)
    racks_of: Mapping[str, Sequence[Sequence[str]]] = document.get("partition_racks") or {}
    weights_of: Mapping[str, Sequence[int]] = document.get("partition_weights") or {}
    # rows repeat (most partitions share their racks): one frozenset per row object
    sets: dict[int, frozenset[str]] = {}

    def racks(row: Sequence[str]) -> frozenset[str]:
        found = sets.get(id(row))
        if found is None:
            found = sets[id(row)] = frozenset(row)
        return found

    figures = dict.fromkeys(FIGURES, 0)
    for index, group in enumerate(lay.groups):
        # (replica racks per partition, weights per partition or None) of known topics
        known = [(racks_of[t], weights_of.get(t)) for t in group.topics if racks_of.get(t)]
        if not known:
            continue
        member_racks = {lay.rack.get(m) for m in group.eligible}
        owners = now.owner[index]
        for p in range(group.partitions):
            parts = [
                (racks(rows[p]), 1 if weights is None else int(weights[p]))
                for rows, weights in known
                if p < len(rows) and rows[p] and (weights is None or weights[p])
            ]
            if not parts:
                continue
            figures["rack_tasks"] += 1
            local = frozenset.intersection(*(where for where, _ in parts))
            if not any(rack in local for rack in member_racks):
                figures["no_local_member"] += 1
            owner = owners[p]
            if owner is None:
                continue
            rack = lay.rack.get(owner)
            traffic = sum(weight for where, weight in parts if rack not in where)
            if traffic:
                figures["cross_rack_tasks"] += 1
                figures["cross_rack_traffic"] += traffic
    return figures
