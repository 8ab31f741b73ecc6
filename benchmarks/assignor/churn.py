"""Churn: how often the assignor starts a task cold while a caught-up copy lives, and
how often a task's copies sit on one rack while another rack could hold one.

A seeded sequence of group changes (members join, leave, crash, restart with
stale claims) is replayed against the pure assignor, in two shapes:

* ``one per host``: one worker per host, racks r1..r3 drawn per member;
* ``2 per host``: several workers per host (faust runs one per core), six on
  three hosts to start, a joining worker going to a host in use or a new one,
  racks r1..r2 a property of the host.
 After every round the members report
what they were given the way workers do (actives at the changelog's end,
standbys a few records behind, warm-ups caught up when they had a round to
restore, new members nothing). Two variants run the same sequence:

* ``warm-ups``: ``max_warmup_replicas`` unset (the default);
* ``cold moves``: ``max_warmup_replicas`` 0 (every task goes to its target at
  once, the assignor's behaviour before warm-ups).

For every round and stateful task the figures are computed from the input
and output alone: a **cold activation** is a task made active on a member that
was not caught up; it is **avoidable** when some live eligible member was
caught up on it. A task is **rack-unsafe** when its copies (active +
standbys) sit on fewer racks than the members allow (a member holds one replica
of a task, so the member warming it up cannot also hold its standby); it is
**short of standbys** when it has fewer than ``standby_replicas`` while a member on
another host than its active's (not its warm-up's holder) holds none of it.
A round is **unbalanced** when no warm-up is pending and a group's active
counts differ by more than one (capacities are equal); **held back** counts
tasks kept off their target without a warm-up.

Brokers have racks too (issue 41): every partition has two replicas on racks
r1..r3 (``partition_racks``, rotating with the partition, each topic shifted
so that a task's partitions share one rack). A task is **cross-rack** in a
round when its active member's rack holds no replica of one of its partitions
(:mod:`benchmarks.metrics.racks`); *cross anyway* counts the tasks no eligible
member could run without crossing (in the 2-per-host shape no member is on
r3). Each variant runs rack-aware (the default ``rack_traffic_cost``) and
rack-oblivious (``rack_traffic_cost`` 0: the assignor before issue 41).
faust-streaming 0.15.3's assignor (``faust_peer.py``) replays the same churn
from its own outputs, judged by the same code; it has no warm-ups and ignores
generations, offsets and racks. Its rows need ``PYTHONHASHSEED=0`` to repeat
(faust's choices follow set order): the command re-executes itself with it.

    python -m benchmarks.assignor.churn [--rounds 300] [--seed 7] [--shape both]
                                        [--skip-faust]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.assignor import faust_peer
from benchmarks.assignor.scenarios import replica_racks
from benchmarks.harness.report import render_table, say
from benchmarks.metrics import quality
from benchmarks.metrics.racks import cross_rack
from streamjoin.assignment import assign_document

Doc = dict[str, Any]
END = 10_000
TOPICS = {"imp": 24, "clk": 24, "state-changelog": 24, "agg": 8, "agg-changelog": 8}
STATEFUL = {"imp": "state-changelog", "agg": "agg-changelog"}
#: per topic, the shift of its replicas' racks (:func:`~.scenarios.replica_racks`):
#: partition p of imp+clk+state-changelog has all three on rack r((p + 1) % 3 + 1),
#: of agg+agg-changelog on r(p % 3 + 1)
RACK_SHIFTS = {"imp": 0, "clk": 1, "state-changelog": 0, "agg": 2, "agg-changelog": 0}
PARTITION_RACKS = {
    topic: replica_racks(TOPICS[topic], shift, prefix="r") for topic, shift in RACK_SHIFTS.items()
}


def _member(serial: int, rnd: random.Random, host: int | None = None) -> dict[str, Any]:
    """A worker on its own host (``host`` None) or on host ``host`` (racks by host)."""
    return {
        "id": f"m{serial:04d}",
        "topics": sorted(TOPICS),
        "host": f"h{serial:04d}" if host is None else f"s{host:02d}",
        "rack": f"r{rnd.randrange(3) + 1}" if host is None else f"r{host % 2 + 1}",
    }


def _host_for(doc: Doc, rnd: random.Random) -> int:
    """A joining worker's host when hosts are shared: one in use, or a new one."""
    used = sorted({int(m["host"][1:]) for m in doc["members"]})
    return rnd.choice([*used, max(used, default=-1) + 1])


def _report(doc: Doc, out: Doc, rounds_warming: dict[tuple[str, str, int], int]) -> Doc:
    """What every member reports after running ``out`` for a round."""
    members = []
    for m in doc["members"]:
        owned = out["assignment"][m["id"]]
        offsets: dict[str, dict[str, int]] = {}
        for kind, behind in (("actives", 0), ("standbys", 40)):
            for topic, parts in owned[kind].items():
                if topic.endswith("-changelog"):
                    offsets.setdefault(topic, {}).update({str(p): END - behind for p in parts})
        for topic, parts in owned.get("warmups", {}).items():
            for p in parts:
                key = (m["id"], topic, p)
                rounds_warming[key] = rounds_warming.get(key, 0) + 1
                # a warm-up has caught up once it had a round to restore
                at = END if rounds_warming[key] >= 1 else 0
                offsets.setdefault(topic, {})[str(p)] = at
        members.append(
            dict(
                m,
                generation=out["generation"],
                actives=owned["actives"],
                standbys=owned["standbys"],
                warmups=owned.get("warmups", {}),
                offsets=offsets,
            )
        )
    return dict(doc, members=members)


def _change(doc: Doc, rnd: random.Random, serial: int, shared: bool) -> None:
    members = doc["members"]
    event = rnd.choice(["join", "leave", "crash", "restart-stale"])
    if event == "join" or len(members) < 4:
        members.append(_member(serial, rnd, _host_for(doc, rnd) if shared else None))
    elif event in ("leave", "crash"):
        members.pop(rnd.randrange(len(members)))
    else:
        victim = members[rnd.randrange(len(members))]
        victim["generation"] = max(0, victim.get("generation", 0) - 2)
    if len(members) > 12:
        members.pop(rnd.randrange(len(members)))


def _judge(doc: Doc, out: Doc, acceptable: int) -> dict[str, int]:
    """Cold activations (avoidable or not), rack-unsafe and cross-rack tasks of one round.

    faust's output has no ``stats``: nothing is held back by it, and its round is
    unbalanced when a group's active counts differ by more than one (it has no warm-ups).
    """
    figures = dict.fromkeys(FIGURES, 0)
    rack = {m["id"]: m["rack"] for m in doc["members"]}
    host = {m["id"]: m["host"] for m in doc["members"]}
    claims: dict[tuple[str, int], str] = {}
    top = max((m.get("generation", -1) for m in doc["members"]), default=-1)
    for m in doc["members"]:
        if m.get("generation") == top:
            for topic in STATEFUL:
                for p in m.get("actives", {}).get(topic, []):
                    claims[(topic, p)] = m["id"]
    for topic, changelog in STATEFUL.items():
        for p in range(TOPICS[topic]):
            figures["stateful"] += 1
            (owner,) = [
                mid for mid, a in out["assignment"].items() if p in a["actives"].get(topic, [])
            ]
            spare = [
                mid for mid, a in out["assignment"].items() if p in a["standbys"].get(changelog, [])
            ]
            reported = {
                m["id"]: m["offsets"][changelog][str(p)]
                for m in doc["members"]
                if str(p) in m.get("offsets", {}).get(changelog, {})
            }
            best = max(reported.values(), default=None)
            caught = {
                mid for mid, o in reported.items() if best is not None and best - o <= acceptable
            }
            if claims.get((topic, p)) != owner:
                figures["activations"] += 1
                if owner not in caught:
                    figures["cold"] += 1
                    if caught:
                        figures["avoidable"] += 1
            warming = {
                mid
                for mid, a in out["assignment"].items()
                if p in a.get("warmups", {}).get(changelog, [])
            }
            # a member holds one replica of a task: the warm-up's holder cannot be a standby
            others = {rack[mid] for mid in rack if mid != owner and mid not in warming}
            others -= {rack[owner]}
            spanned = {rack[owner], *(rack[mid] for mid in spare)}
            if len(spanned) < min(1 + len(spare), 1 + len(others)):
                figures["rack_unsafe"] += 1
            free = {host[mid] for mid in host if mid != owner and mid not in warming}
            free -= {host[owner], *(host[mid] for mid in spare)}
            if len(spare) < doc["standby_replicas"] and free:
                figures["short_of_standbys"] += 1
    racks = cross_rack(doc, output=out)
    figures["cross_rack"] = racks["cross_rack_tasks"]
    figures["cross_anyway"] = racks["no_local_member"]
    stats = out.get("stats") or {}
    if "held_back" in stats:
        figures["held_back"] = stats["held_back"]
        if stats["warmups"] == 0 and stats["active_spread_per_group"] > 1:
            figures["unbalanced"] = 1
    elif quality.evaluate(doc, out)["spread_group_max"] > 1:
        figures["unbalanced"] = 1
    return figures


FIGURES = (
    "activations",
    "cold",
    "avoidable",
    "stateful",
    "rack_unsafe",
    "short_of_standbys",
    "held_back",
    "unbalanced",
    "cross_rack",
    "cross_anyway",
)

FAUST = "faust"


def _faust(doc: Doc) -> tuple[Doc, float]:
    """faust's assignment of ``doc`` and the seconds its leader's assignment took."""
    prepared = faust_peer.prepare(doc)
    seconds = faust_peer.run(prepared)
    return faust_peer.to_output(prepared), seconds


def run(
    rounds: int, seed: int, cap: int | None, per_host: int = 1, *,
    rack_traffic_cost: int | None = None, assignor: str = "streamjoin",
) -> dict[str, float]:
    """Replay the seeded churn with ``max_warmup_replicas`` = ``cap``; ``per_host``
    workers on each host to start (1: every worker on its own host);
    ``rack_traffic_cost`` as given (None: the assignor's default); ``assignor``
    ``"faust"``: faust's assignor instead, replaying its own outputs (``cap`` and
    ``rack_traffic_cost`` mean nothing to it)."""
    rnd = random.Random(seed)
    shared = per_host > 1
    doc: Doc = {
        "topics": TOPICS,
        "copartition": [["imp", "clk", "state-changelog"]],
        "changelogs": ["state-changelog", "agg-changelog"],
        "standby_replicas": 1,
        "acceptable_recovery_lag": 100,
        "max_warmup_replicas": cap,
        "partition_racks": PARTITION_RACKS,
        "members": [_member(i, rnd, i // per_host if shared else None) for i in range(6)],
    }
    if rack_traffic_cost is not None:
        doc["rack_traffic_cost"] = rack_traffic_cost

    def assign(doc: Doc) -> tuple[Doc, float]:
        if assignor == FAUST:
            return _faust(doc)
        started = time.perf_counter()
        out = assign_document(doc)
        return out, time.perf_counter() - started

    totals = dict.fromkeys(FIGURES, 0)
    warming: dict[tuple[str, str, int], int] = {}
    out, _ = assign(doc)
    seconds = 0.0
    for serial in range(rounds):
        doc = _report(doc, out, warming)
        _change(doc, rnd, 100 + serial, shared)
        out, took = assign(doc)
        seconds += took
        for key, value in _judge(doc, out, doc["acceptable_recovery_lag"]).items():
            totals[key] += value
    return {**totals, "seconds": seconds}


SHAPES = {"one per host": 1, "2 per host": 2}
#: (label, max_warmup_replicas, rack_traffic_cost, assignor) per row of a shape
VARIANTS: tuple[tuple[str, int | None, int | None, str], ...] = (
    ("warm-ups, racks (default)", None, None, "streamjoin"),
    ("warm-ups, rack-oblivious (cost 0)", None, 0, "streamjoin"),
    ("cold moves (cap 0), racks", 0, None, "streamjoin"),
    ("cold moves (cap 0), rack-oblivious", 0, 0, "streamjoin"),
    (f"faust {faust_peer.FAUST_VERSION}", None, None, FAUST),
)
#: the repository root (a re-executed run imports ``benchmarks`` from there)
ROOT = Path(__file__).resolve().parents[2]


def _row(shape: str, label: str, f: dict[str, float], rounds: int, faust: bool) -> list[str]:
    warm = f["activations"] - f["cold"]
    return [
        shape,
        label,
        f"{int(f['activations']):,}",
        f"{warm / f['activations']:.2f}" if f["activations"] else "n/a",
        f"{int(f['cold']):,}",
        f"{int(f['avoidable']):,}",
        f"{int(f['rack_unsafe']):,} of {int(f['stateful']):,}",
        f"{int(f['short_of_standbys']):,}",
        "–" if faust else f"{int(f['held_back']):,}",
        f"{int(f['unbalanced']):,}",
        f"{int(f['cross_rack']):,} ({int(f['cross_anyway']):,})",
        f"{f['seconds'] / rounds * 1000:.1f} ms",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.assignor.churn", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--shape",
        choices=["one", "shared", "both"],
        default="both",
        help="one worker per host, several per host, or both side by side",
    )
    parser.add_argument("--skip-faust", action="store_true",
                        help="leave faust's assignor out")
    args = parser.parse_args(argv)
    shapes = {"one": ["one per host"], "shared": ["2 per host"]}.get(args.shape, list(SHAPES))
    rows = []
    for shape in shapes:
        for label, cap, cost, assignor in VARIANTS:
            if assignor == FAUST and args.skip_faust:
                continue
            f = run(args.rounds, args.seed, cap, SHAPES[shape], rack_traffic_cost=cost,
                    assignor=assignor)
            rows.append(_row(shape, label, f, args.rounds, assignor == FAUST))
    say(
        f"churn: {args.rounds} rounds, seed {args.seed}, 32 stateful tasks, 1 standby; "
        "one per host: 3 racks; 2 per host: six workers on three hosts to start, 2 racks; "
        "brokers on racks r1..r3, 2 replicas per partition"
    )
    say(
        render_table(
            [
                "hosts",
                "variant",
                "activations",
                "warm share",
                "cold",
                "cold while warm existed",
                "rack-unsafe task-rounds",
                "short of standbys",
                "held back",
                "unbalanced rounds",
                "cross-rack task-rounds (cross anyway)",
                "assign time/round",
            ],
            rows,
        )
    )
    return 0


def _with_fixed_hash_seed() -> None:
    """Run this command again with ``PYTHONHASHSEED=0`` unless it has it (or leaves
    faust out): faust's choices follow set order, so its rows repeat only then."""
    if "--skip-faust" in sys.argv or os.environ.get("PYTHONHASHSEED") == "0":
        return
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    os.execve(
        sys.executable,
        [sys.executable, "-m", "benchmarks.assignor.churn", *sys.argv[1:]],
        dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=path),
    )


if __name__ == "__main__":
    _with_fixed_hash_seed()
    raise SystemExit(main())
