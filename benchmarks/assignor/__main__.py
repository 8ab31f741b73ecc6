"""streamjoin's assignor side by side with faust-streaming 0.15.3's, on the same scenarios.

``make bench`` runs this (``python -m benchmarks.assignor``).  For every scenario (see
``scenarios.py``) and
for each assignor it measures, in a fresh subprocess per measurement:

* the fresh assignment (nobody reports a previous assignment), then
* the rebalance from that assignor's OWN fresh result after the scenario's change (a
  member joins or leaves),

and judges both results with ``benchmarks/metrics`` (same code for both assignors);
``report.py`` prints them side by side.

Time is wall-clock ``time.perf_counter`` around the assignor call only: building the
document (and, for faust, encoding each member's metadata the way a worker does before
the leader runs) happens before the clock starts.  streamjoin's figure is
``streamjoin.assignment.assign_document(doc)``; faust's is
``PartitionAssignor._perform_assignment`` up to its hand-off to the wire encoding (see
``faust_peer.py``; ``--faust-encode`` also times that encoding).

Peak memory is the growth of the measuring process's peak resident set size during the
call: the kernel's high-water mark (``VmHWM``) is reset through ``/proc/self/clear_refs``
right before the call and read right after it, minus the resident size at the start.
It is RSS-based (whole process, includes interpreter allocator slack), not tracemalloc.

Rack scenarios (``*-racks``, issue 41) add broker racks to a, b, e and f: both
assignors' results are also judged for cross-rack tasks (``benchmarks.metrics.racks``),
and streamjoin is measured once more on the same documents without
``partition_racks``, in the same run: its time with racks over its time without, against
issue 41's target of 1.5x.  Those streamjoin measurements take the best of
``Scenario.repeat`` calls in their process (a single call of a millisecond is mostly
noise).

Each measurement has a time budget (``--peer-timeout``, default 120 s); a measurement
that exceeds it is killed and shown as ``> 120 s (timed out)``.  Subprocesses run with
``PYTHONHASHSEED=0`` so faust's set-order-dependent choices repeat from run to run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.assignor import faust_peer, scenarios
from benchmarks.assignor.report import (
    ASSIGNORS,
    LABELS,
    render_rack_summary,
    render_scenario,
    render_summary,
)
from benchmarks.harness.measure import PEAK_RSS_METHOD, PeakRss
from benchmarks.harness.report import log
from benchmarks.metrics import quality

#: the repository root: each measurement runs there as ``python -m benchmarks.assignor``
ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------- measuring (child side)


def _run_child(spec_path: str) -> int:
    """Measure one (assignor, scenario, phase) and write the figures to ``spec['out']``."""
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    scenario = scenarios.SCENARIOS[spec["scenario"]]
    document = scenario.fresh_document()
    if spec.get("strip_racks"):
        document = scenarios.without_replica_racks(document)
    if spec["phase"] == "rebalance":
        with open(spec["previous"], encoding="utf-8") as handle:
            previous = json.load(handle)["output"]
        document = scenario.rebalance_document(document, previous)
        del previous
    result: dict[str, Any] = {}
    try:
        if spec["assignor"] == "faust":
            prepared = faust_peer.prepare(document, encode=bool(spec.get("encode")))

            def call() -> float:
                return faust_peer.run(prepared)

        else:
            from streamjoin import assignment

            assign_document = getattr(assignment, "assign_document", None)
            if assign_document is None:
                raise RuntimeError("streamjoin.assignment.assign_document does not exist yet")
            holder: dict[str, Any] = {}

            from streamjoin._gc import gc_paused

            repeat = max(1, int(spec.get("repeat") or 1))

            def call() -> float:
                # as the worker's adapter and `streamjoin assign` run it; the best of
                # ``repeat`` calls (the document is left as it was by each)
                best = float("inf")
                for _ in range(repeat):
                    started = time.perf_counter()
                    with gc_paused():
                        holder["output"] = assign_document(document)
                    best = min(best, time.perf_counter() - started)
                return best

        gc.collect()
        Path(f"{spec['out']}.started").touch()
        peak = PeakRss()
        seconds = call()
        Path(f"{spec['out']}.finished").touch()
        peak_bytes = peak.growth_bytes()
        output = faust_peer.to_output(prepared) if spec["assignor"] == "faust" else (
            holder["output"]
        )
        result = {
            "status": "ok",
            "seconds": seconds,
            "peak_bytes": peak_bytes,
            "output": output,
        }
    except Exception as exc:
        result = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    with open(spec["out"], "w", encoding="utf-8") as handle:
        json.dump(result, handle, separators=(",", ":"))
    return 0


# ---------------------------------------------------------------- orchestrating (parent)


def _measure(
    workdir: Path, assignor: str, scenario: scenarios.Scenario, phase: str,
    previous: Path | None, budget: float, encode: bool, *, strip_racks: bool = False,
) -> dict[str, Any]:
    tag = f"{scenario.name}{'.no-racks' if strip_racks else ''}.{assignor}.{phase}"
    out = workdir / f"{tag}.out.json"
    spec = workdir / f"{tag}.spec.json"
    spec.write_text(
        json.dumps(
            {
                "assignor": assignor,
                "scenario": scenario.name,
                "phase": phase,
                "previous": str(previous) if previous else None,
                "out": str(out),
                "encode": encode,
                "strip_racks": strip_racks,
                "repeat": scenario.repeat if assignor == "streamjoin" else 1,
            }
        ),
        encoding="utf-8",
    )
    env = dict(os.environ, PYTHONHASHSEED="0")
    command = [sys.executable, "-m", "benchmarks.assignor", "--child", str(spec)]
    label = f"{LABELS[assignor]}{' no racks' if strip_racks else ''}"
    log(f"  {label:<14} {phase:<9} … (budget {budget:g} s)")
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, cwd=ROOT, start_new_session=True)
    code = _wait(child, out, budget, _setup_allowance(scenario))
    if code is None:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        log(f"  {label:<14} {phase:<9} timed out")
        return {"status": "timeout", "budget": budget}
    if code != 0 or not out.exists():
        return {"status": "error", "error": f"measuring process exited with {code}"}
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    if result.get("status") == "ok" and result["seconds"] > budget:
        return {"status": "timeout", "budget": budget}
    elapsed = time.perf_counter() - started
    if result.get("status") == "ok":
        log(f"  {label:<14} {phase:<9} {result['seconds']:.3f} s "
             f"(process {elapsed:.1f} s)")
    else:
        log(f"  {label:<14} {phase:<9} {result.get('error')}")
    result["output_path"] = str(out)
    return result


def _wait(
    child: subprocess.Popen[bytes], out: Path, budget: float, allowance: float
) -> int | None:
    """Exit code, or None when the assignor call outlived its budget.

    The measuring process touches ``<out>.started`` right before the assignor call and
    ``<out>.finished`` right after it: the budget runs between the two; building the
    inputs before and writing the result after get ``allowance`` seconds each.
    """
    started, finished = Path(f"{out}.started"), Path(f"{out}.finished")
    deadline = time.monotonic() + allowance
    phase = "setup"
    while True:
        code = child.poll()
        if code is not None:
            return code
        now = time.monotonic()
        if phase == "setup" and started.exists():
            phase, deadline = "call", now + budget
        if phase == "call" and finished.exists():
            phase, deadline = "result", now + allowance
        if now > deadline:
            return None
        time.sleep(0.05)


def _setup_allowance(scenario: scenarios.Scenario) -> float:
    # Slack for building the inputs before the call and writing the result after it.
    return 15.0 if scenario.quick else 120.0


def run_scenario(
    scenario: scenarios.Scenario, workdir: Path, budget: float, encode: bool
) -> dict[str, Any]:
    """Both assignors, fresh and rebalance, with metrics; raw figures as a dict."""
    log(f"[{scenario.name}] {scenario.title}")
    fresh_document = scenario.fresh_document()
    figures: dict[str, Any] = {"title": scenario.title, "change": scenario.change}
    for assignor in ASSIGNORS:
        fresh = _measure(workdir, assignor, scenario, "fresh", None, budget, encode)
        entry: dict[str, Any] = {"fresh": _public(fresh)}
        if fresh.get("status") == "ok":
            log(f"  {LABELS[assignor]:<14} judging fresh result")
            entry["fresh"]["metrics"] = quality.evaluate(fresh_document, fresh["output"])
            rebalance = _measure(
                workdir, assignor, scenario, "rebalance", Path(fresh["output_path"]), budget,
                encode,
            )
            entry["rebalance"] = _public(rebalance)
            if rebalance.get("status") == "ok":
                log(f"  {LABELS[assignor]:<14} judging rebalance result")
                document = scenario.rebalance_document(fresh_document, fresh["output"])
                change, member = scenarios.changed_member(fresh_document, document)
                entry["rebalance"]["metrics"] = quality.evaluate(
                    document, rebalance["output"], fresh["output"],
                    joiner=member if change == "join" else None,
                )
                entry["rebalance"]["change"] = {"kind": change, "member": member}
                del document
            del rebalance
        else:
            entry["rebalance"] = {"status": "not run", "reason": "fresh did not complete"}
        del fresh
        figures[assignor] = entry
        gc.collect()
        if assignor == "streamjoin" and scenario.plain:
            # right after the measurements with racks, before faust's: the ratio compares
            # times taken minutes apart at most
            figures["without_racks"] = _without_racks(scenario, workdir, budget)
    return figures


def _without_racks(scenario: scenarios.Scenario, workdir: Path, budget: float) -> dict[str, Any]:
    """streamjoin on the rack scenario's documents without ``partition_racks`` (its
    plain twin), fresh then rebalance from that fresh result: what racks cost in time."""
    log(f"  streamjoin without partition_racks (as {scenario.plain})")
    figures: dict[str, Any] = {"plain": scenario.plain, "repeat": scenario.repeat}
    fresh = _measure(workdir, "streamjoin", scenario, "fresh", None, budget, False,
                     strip_racks=True)
    figures["fresh"] = _public(fresh)
    if fresh.get("status") == "ok":
        rebalance = _measure(workdir, "streamjoin", scenario, "rebalance",
                             Path(fresh["output_path"]), budget, False, strip_racks=True)
        figures["rebalance"] = _public(rebalance)
    else:
        figures["rebalance"] = {"status": "not run", "reason": "fresh did not complete"}
    return figures


def _public(result: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("status", "seconds", "peak_bytes", "error", "budget")
    public = {k: result[k] for k in keep if k in result}
    stats = result.get("output", {}).get("stats") if result.get("status") == "ok" else None
    if stats:
        public["stats"] = stats
    return public


# ---------------------------------------------------------------- command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.assignor",
        description="Compare streamjoin's assignor with faust-streaming's built-in one.",
        epilog="Scenarios: " + ", ".join(scenarios.SCENARIOS),
    )
    parser.add_argument("--scenario", action="append", choices=sorted(scenarios.SCENARIOS),
                        help="run only this scenario (repeatable)")
    parser.add_argument("--quick", action="store_true",
                        help="small scenarios only (CI smoke run)")
    parser.add_argument("--json", metavar="FILE", help="write the raw figures to FILE")
    parser.add_argument("--peer-timeout", type=float, default=120.0, metavar="SECONDS",
                        help="time budget of each measurement (default 120)")
    parser.add_argument("--faust-encode", action="store_true",
                        help="also run and time faust's wire encoding of the assignment")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``make bench``."""
    args = parse_args(argv)
    if args.child:
        return _run_child(args.child)
    if args.scenario:
        selected = [scenarios.SCENARIOS[name] for name in args.scenario]
    else:
        selected = [s for s in scenarios.SCENARIOS.values() if s.quick or not args.quick]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="streamjoin-bench-") as tmp:
        for scenario in selected:
            results[scenario.name] = run_scenario(
                scenario, Path(tmp), args.peer_timeout, args.faust_encode
            )
    print(f"Assignor benchmark — python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, budget {args.peer_timeout:g} s per measurement")
    print(f"time: assignor call only; memory: {PEAK_RSS_METHOD}")
    print("spread = max−min active tasks per member (total / worst group); "
          "moves / minimum over any balanced assignment; warm = moved tasks placed on a "
          "previous standby holder / moved tasks that had one\n")
    for name, figures in results.items():
        print(render_scenario(name, figures))
        print()
    print("Summary (rebalance: spread total/worst group, moves/minimum, tasks of the joiner)")
    print(render_summary(results))
    racks = render_rack_summary(results)
    if racks:
        print()
        print("Racks (issue 41): cross-rack tasks / tasks that cross wherever they run, "
              "judged by benchmarks.metrics.racks (faust ignores racks); streamjoin's time "
              "with partition_racks / the same document without (best of N calls each; "
              "target within 1.5x)")
        print(racks)
    if args.json:
        payload = {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "faust": faust_peer.FAUST_VERSION,
            "budget_s": args.peer_timeout,
            "memory_method": PEAK_RSS_METHOD,
            "scenarios": results,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
