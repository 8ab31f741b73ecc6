"""Where one ``assign_document`` call spends its time, and the floor under it.

The assignor benchmark (``benchmarks/assignor.py``) gives one figure per call;
this splits the call of one scenario into the steps of
:func:`streamjoin.assignment.assignor.place` and ``assign_document``'s parsing
and rendering, and measures the floor any pure-Python reader of the same
document pays: visiting every partition and offset the members report once,
doing nothing with them.

Each step is timed by wrapping the function its caller calls (a wrapper costs
well under a microsecond; the steps run once per call). Times are medians over
``--runs`` calls in this process, the garbage collector paused as the worker
runs it. On the 2-core development machines they vary by a quarter from run
to run: compare versions with ``benchmarks/instructions.py``.

    python benchmarks/assignor_limits.py --scenario e-10k-members --phase rebalance
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import scenarios  # noqa: E402
from streamjoin._gc import gc_paused  # noqa: E402
from streamjoin.assignment import assign_document  # noqa: E402
from streamjoin.assignment import assignor as assignor_module  # noqa: E402
from streamjoin.assignment import document as document_module  # noqa: E402
from streamjoin.assignment import standbys as standbys_module  # noqa: E402

#: (label, module whose global the caller looks up, function name), in call order;
#: the indented ones run inside the step above them
STEPS: list[tuple[str, ModuleType, str]] = [
    ("parse and check the document", document_module, "_parse"),
    ("place (all of it)", document_module, "place"),
    ("  group topics into tasks", assignor_module, "build_groups"),
    ("  read claims and offsets", assignor_module, "read_history"),
    ("  active quotas", assignor_module, "balanced_quotas"),
    ("  place target owners", assignor_module, "place_actives"),
    ("  settle (warm-ups)", assignor_module, "settle"),
    ("  standbys (all of it)", assignor_module, "place_standbys"),
    ("    standby quotas", standbys_module, "balanced_quotas"),
    ("  moves", assignor_module, "actual_moves"),
    ("  stats", assignor_module, "_stats"),
    ("  target stats", assignor_module, "_target_stats"),
    ("member tables", document_module, "member_tables"),
]


@contextmanager
def timed_steps(spent: dict[str, float]) -> Iterator[None]:
    """Add each step's seconds to ``spent`` (by label) while the block runs."""
    originals: list[tuple[ModuleType, str, Callable[..., Any]]] = []
    for label, module, name in STEPS:
        original = getattr(module, name)  # AttributeError: the step was renamed
        originals.append((module, name, original))

        def wrapper(
            *args: Any, _f: Callable[..., Any] = original, _label: str = label, **kwargs: Any
        ) -> Any:
            started = time.perf_counter()
            try:
                return _f(*args, **kwargs)
            finally:
                spent[_label] = spent.get(_label, 0.0) + time.perf_counter() - started

        setattr(module, name, functools.wraps(original)(wrapper))
    try:
        yield
    finally:
        for module, name, original in originals:
            setattr(module, name, original)


def visit_reports(document: dict[str, Any]) -> int:
    """Visit every partition and offset the members report; return how many."""
    seen = 0
    for member in document["members"]:
        for field in ("actives", "standbys", "warmups"):
            for _topic, partitions in member.get(field, {}).items():
                for _p in partitions:
                    seen += 1
        for _topic, offsets in member.get("offsets", {}).items():
            for _key, _offset in offsets.items():
                seen += 1
    return seen


def build_document(name: str, phase: str) -> dict[str, Any]:
    """The scenario's document, built the way ``benchmarks/assignor.py`` builds it."""
    with gc_paused():
        return scenarios.SCENARIOS[name].document(phase, assign_document)


def measure(document: dict[str, Any], runs: int) -> dict[str, Any]:
    """Median seconds per step, of the whole call, and of the floor, over ``runs``."""
    per_step: dict[str, list[float]] = {label: [] for label, _, _ in STEPS}
    totals: list[float] = []
    floors: list[float] = []
    entries = 0
    for _ in range(runs):
        spent: dict[str, float] = {}
        with timed_steps(spent), gc_paused():
            started = time.perf_counter()
            result = assign_document(document)
            totals.append(time.perf_counter() - started)
        del result
        missing = sorted(label for label, _, _ in STEPS if label not in spent)
        if missing:
            raise RuntimeError(f"steps never called (renamed or moved?): {missing}")
        for label, seconds in spent.items():
            per_step[label].append(seconds)
        with gc_paused():
            started = time.perf_counter()
            entries = visit_reports(document)
            floors.append(time.perf_counter() - started)
    return {
        "steps": {label: statistics.median(values) for label, values in per_step.items()},
        "total": statistics.median(totals),
        "best": min(totals),
        "floor": statistics.median(floors),
        "entries": entries,
        "members": len(document["members"]),
    }


def report(name: str, phase: str, runs: int, found: dict[str, Any]) -> str:
    """The table ``main`` prints."""
    total = found["total"]
    lines = [
        f"{name} {phase}: {found['members']:,} members reporting {found['entries']:,} "
        f"partitions and offsets; medians of {runs} call(s)",
        f"{'step':<34}{'seconds':>9}{'share':>8}",
    ]
    for label, seconds in found["steps"].items():
        lines.append(f"{label:<34}{seconds:>9.3f}{seconds / total:>8.0%}")
    # the steps assign_document calls itself (the others run inside them)
    accounted = sum(
        found["steps"][label] for label, _, _ in STEPS if not label.startswith(" ")
    )
    lines.append(f"{'rendering and the rest':<34}{total - accounted:>9.3f}"
                 f"{(total - accounted) / total:>8.0%}")
    lines.append(f"{'assign_document':<34}{total:>9.3f}{1:>8.0%}   (best {found['best']:.3f})")
    lines.append(
        f"floor: visiting every reported partition and offset once, doing nothing: "
        f"{found['floor']:.3f} s ({found['floor'] / total:.0%} of the call)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="e-10k-members", choices=sorted(scenarios.SCENARIOS))
    parser.add_argument("--phase", default="rebalance", choices=["fresh", "rebalance"])
    parser.add_argument("--runs", type=int, default=5, help="calls to take medians over")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    print(f"building {args.scenario} ({args.phase}) …", flush=True)
    document = build_document(args.scenario, args.phase)
    print(report(args.scenario, args.phase, args.runs, measure(document, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
