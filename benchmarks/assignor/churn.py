"""Churn: how often the assignor starts a task cold while a caught-up copy lives, and
how often a task's copies sit on one rack while another rack could hold one.

A seeded sequence of group changes (members join, leave, crash, restart with
stale claims; racks r1..r3 with several members each, one host per member)
is replayed against the pure assignor. After every round the members report
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
of a task, so the member warming it up cannot also hold its standby).

    python -m benchmarks.assignor.churn [--rounds 300] [--seed 7]
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


def _member(serial: int, rnd: random.Random) -> dict[str, Any]:
    return {
        "id": f"m{serial:04d}",
        "topics": sorted(TOPICS),
        "host": f"h{serial:04d}",
        "rack": f"r{rnd.randrange(3) + 1}",
    }


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


def _change(doc: Doc, rnd: random.Random, serial: int) -> None:
    members = doc["members"]
    event = rnd.choice(["join", "leave", "crash", "restart-stale"])
    if event == "join" or len(members) < 4:
        members.append(_member(serial, rnd))
    elif event in ("leave", "crash"):
        members.pop(rnd.randrange(len(members)))
    else:
        victim = members[rnd.randrange(len(members))]
        victim["generation"] = max(0, victim.get("generation", 0) - 2)
    if len(members) > 12:
        members.pop(rnd.randrange(len(members)))


def _judge(doc: Doc, out: Doc, acceptable: int) -> dict[str, int]:
    """Cold activations (avoidable or not) and rack-unsafe tasks of one round."""
    figures = {"activations": 0, "cold": 0, "avoidable": 0, "stateful": 0, "rack_unsafe": 0}
    rack = {m["id"]: m["rack"] for m in doc["members"]}
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
    return figures


def run(rounds: int, seed: int, cap: int | None) -> dict[str, float]:
    """Replay the seeded churn with ``max_warmup_replicas`` = ``cap``."""
    rnd = random.Random(seed)
    doc: Doc = {
        "topics": TOPICS,
        "copartition": [["imp", "clk", "state-changelog"]],
        "changelogs": ["state-changelog", "agg-changelog"],
        "standby_replicas": 1,
        "acceptable_recovery_lag": 100,
        "max_warmup_replicas": cap,
        "members": [_member(i, rnd) for i in range(6)],
    }
    totals = {"activations": 0, "cold": 0, "avoidable": 0, "stateful": 0, "rack_unsafe": 0}
    warming: dict[tuple[str, str, int], int] = {}
    out = assign_document(doc)
    seconds = 0.0
    for serial in range(rounds):
        doc = _report(doc, out, warming)
        _change(doc, rnd, 100 + serial)
        started = time.perf_counter()
        out = assign_document(doc)
        seconds += time.perf_counter() - started
        for key, value in _judge(doc, out, doc["acceptable_recovery_lag"]).items():
            totals[key] += value
    return {**totals, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.assignor.churn", description=__doc__
    )
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rows = []
    for label, cap in (("warm-ups", None), ("cold moves", 0)):
        f = run(args.rounds, args.seed, cap)
        warm = f["activations"] - f["cold"]
        rows.append(
            [
                label,
                f"{int(f['activations']):,}",
                f"{warm / f['activations']:.2f}" if f["activations"] else "n/a",
                f"{int(f['cold']):,}",
                f"{int(f['avoidable']):,}",
                f"{int(f['rack_unsafe']):,} of {int(f['stateful']):,}",
                f"{f['seconds'] / args.rounds * 1000:.1f} ms",
            ]
        )
    say(f"churn: {args.rounds} rounds, seed {args.seed}, 32 stateful tasks, 1 standby, 3 racks")
    say(
        render_table(
            [
                "variant",
                "activations",
                "warm share",
                "cold",
                "cold while warm existed",
                "rack-unsafe task-rounds",
                "assign time/round",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
