"""Count the instructions one ``assign_document`` call executes, under valgrind.

Wall-clock times of the assignor vary by a quarter from run to run on the
2-core development machines; instruction counts do not. This runs two child
processes under ``valgrind --tool=callgrind``: both build the scenario's
document the way ``benchmarks/assignor.py`` does (for ``rebalance``, from the
assignor's own fresh result passed through JSON), and only the second calls
``assign_document`` on it. The difference is the call's instructions.

``--source DIR`` imports ``streamjoin`` from another checkout (for example a
``git worktree`` of an older commit) to compare two versions on the same input;
the scenarios always come from this checkout. Needs valgrind
(``apt-get install valgrind``); under it, scenario e takes a few minutes.

    python benchmarks/instructions.py --scenario e-10k-members --phase rebalance
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import sys
source, root, scenario, phase, call = sys.argv[1:6]
sys.path.insert(0, root)
from benchmarks import scenarios  # this checkout's, before the measured one is on the path
sys.path.insert(0, source)
from streamjoin._gc import gc_paused
from streamjoin.assignment import assign_document
with gc_paused():
    doc = scenarios.SCENARIOS[scenario].document(phase, assign_document)
if call == "call":
    with gc_paused():
        assign_document(doc)
"""


def _instructions(source: Path, scenario: str, phase: str, call: bool) -> int:
    command = [
        "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
        sys.executable, "-c", _CHILD,
        str(source), str(ROOT), scenario, phase, "call" if call else "stop",
    ]
    # a fixed hash seed: string hashing order otherwise shifts the count a little
    environment = dict(os.environ, PYTHONHASHSEED="0")
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, env=environment
    )
    found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise SystemExit(f"valgrind run failed (exit {done.returncode}):\n{tail}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from benchmarks import scenarios

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="e-10k-members", choices=sorted(scenarios.SCENARIOS))
    parser.add_argument("--phase", default="rebalance", choices=["fresh", "rebalance"])
    parser.add_argument("--source", type=Path, default=ROOT, metavar="DIR",
                        help="checkout whose streamjoin package is measured (default: this one)")
    args = parser.parse_args(argv)
    source = args.source.resolve()
    if not (source / "streamjoin" / "assignment").is_dir():
        print(f"{source} holds no streamjoin/assignment package", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: apt-get install valgrind", file=sys.stderr)
        return 2
    print(f"{args.scenario} {args.phase}, streamjoin from {source}: counting under valgrind …",
          flush=True)
    without = _instructions(source, args.scenario, args.phase, call=False)
    with_call = _instructions(source, args.scenario, args.phase, call=True)
    print(f"{args.scenario} {args.phase}: {(with_call - without) / 1e6:,.0f} million "
          f"instructions in assign_document (whole run {with_call / 1e6:,.0f} million)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
