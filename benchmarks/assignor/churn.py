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

    python -m benchmarks.assignor.churn [--rounds 300] [--seed 7] [--shape both]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from benchmarks.harness.report import render_table, say
from streamjoin.assignment import assign_document

Doc = dict[str, Any]
END = 10_000
TOPICS = {"imp": 24, "clk": 24, "state-changelog": 24, "agg": 8, "agg-changelog": 8}
STATEFUL = {"imp": "state-changelog", "agg": "agg-changelog"}


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
    """Cold activations (avoidable or not) and rack-unsafe tasks of one round."""
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
    stats = out["stats"]
    figures["held_back"] = stats["held_back"]
    if stats["warmups"] == 0 and stats["active_spread_per_group"] > 1:
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
)


def run(rounds: int, seed: int, cap: int | None, per_host: int = 1) -> dict[str, float]:
    """Replay the seeded churn with ``max_warmup_replicas`` = ``cap``; ``per_host``
    workers on each host to start (1: every worker on its own host)."""
    rnd = random.Random(seed)
    shared = per_host > 1
    doc: Doc = {
        "topics": TOPICS,
        "copartition": [["imp", "clk", "state-changelog"]],
        "changelogs": ["state-changelog", "agg-changelog"],
        "standby_replicas": 1,
        "acceptable_recovery_lag": 100,
        "max_warmup_replicas": cap,
        "members": [_member(i, rnd, i // per_host if shared else None) for i in range(6)],
    }
    totals = dict.fromkeys(FIGURES, 0)
    warming: dict[tuple[str, str, int], int] = {}
    out = assign_document(doc)
    seconds = 0.0
    for serial in range(rounds):
        doc = _report(doc, out, warming)
        _change(doc, rnd, 100 + serial, shared)
        started = time.perf_counter()
        out = assign_document(doc)
        seconds += time.perf_counter() - started
        for key, value in _judge(doc, out, doc["acceptable_recovery_lag"]).items():
            totals[key] += value
    return {**totals, "seconds": seconds}


SHAPES = {"one per host": 1, "2 per host": 2}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.assignor.churn", description=__doc__
    )
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--shape",
        choices=["one", "shared", "both"],
        default="both",
        help="one worker per host, several per host, or both side by side",
    )
    args = parser.parse_args(argv)
    shapes = {"one": ["one per host"], "shared": ["2 per host"]}.get(args.shape, list(SHAPES))
    rows = []
    for shape in shapes:
        for label, cap in (("warm-ups", None), ("cold moves", 0)):
            f = run(args.rounds, args.seed, cap, SHAPES[shape])
            warm = f["activations"] - f["cold"]
            rows.append(
                [
                    shape,
                    label,
                    f"{int(f['activations']):,}",
                    f"{warm / f['activations']:.2f}" if f["activations"] else "n/a",
                    f"{int(f['cold']):,}",
                    f"{int(f['avoidable']):,}",
                    f"{int(f['rack_unsafe']):,} of {int(f['stateful']):,}",
                    f"{int(f['short_of_standbys']):,}",
                    f"{int(f['held_back']):,}",
                    f"{int(f['unbalanced']):,}",
                    f"{f['seconds'] / args.rounds * 1000:.1f} ms",
                ]
            )
    say(
        f"churn: {args.rounds} rounds, seed {args.seed}, 32 stateful tasks, 1 standby; "
        "one per host: 3 racks; 2 per host: six workers on three hosts to start, 2 racks"
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
                "assign time/round",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
