"""The rebalance benchmark's pure parts: per-task gaps, phase figures, the table."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.rebalance import __main__ as rebalance  # noqa: E402
from benchmarks.rebalance.traffic import task_gaps  # noqa: E402


def test_a_task_gap_is_its_longest_stretch_without_progress_in_the_window() -> None:
    times = {
        0: [9.0, 10.5, 11.0, 14.0, 15.5, 21.0],  # outside the window: 9.0 and 21.0
        1: [],  # nothing in the window: the whole window
        2: [20.0, 10.0, 12.0],  # any order
    }
    gaps = task_gaps(times, start=10.0, end=20.0, tasks=range(4))
    assert gaps == {0: 4.5, 1: 10.0, 2: 8.0, 3: 10.0}


def test_a_phase_tells_the_moved_tasks_from_the_pause_of_the_kept_ones() -> None:
    phase = rebalance.Phase("cold", "scale-out", {0: 1.5, 1: 2.0, 2: 9.0}, frozenset({2}))
    assert (phase.worst, phase.worst_moved, phase.pause) == (9.0, 9.0, 2.0)
    still = rebalance.Phase("cold", "scale-in", {0: 1.0}, frozenset())
    assert (still.worst_moved, still.pause) == (None, 1.0)


def test_the_table_gives_ratios_against_eager_per_phase() -> None:
    phases = [
        rebalance.Phase("eager", "scale-out", {0: 2.0, 1: 2.0}, frozenset({1}), rebalances=2),
        rebalance.Phase("cold", "scale-out", {0: 2.0, 1: 10.0}, frozenset({1}), rebalances=3),
        rebalance.Phase("faust", "kill -9", {0: 12.0}, frozenset({0})),
    ]
    lines = rebalance.report(phases).splitlines()
    assert lines[0].split()[:3] == ["phase", "/", "variant"]
    cold = next(line for line in lines if line.startswith("scale-out / cold"))
    assert cold.split()[-3:] == ["3", "5.0x", "5.0x"]
    faust = next(line for line in lines if line.startswith("kill -9 / faust"))
    assert faust.split()[-4:] == ["1", "-", "-", "-"]  # no count, no kept task, no eager run


def test_cooperative_eager_and_faust_run_by_default_and_cold_by_name() -> None:
    args = rebalance.build_parser().parse_args([])
    assert args.variants.split(",") == ["cooperative", "eager", "faust"]
    assert rebalance.VARIANTS["cold"][1]["STREAMJOIN_MAX_WARMUP_REPLICAS"] == "0"
    assert rebalance.VARIANTS["cooperative"] == ("streamjoin", {"STREAMJOIN_COOPERATIVE": "1"})
    assert rebalance.VARIANTS["eager"] == ("streamjoin", {"STREAMJOIN_COOPERATIVE": "0"})


def test_a_task_with_no_progress_in_the_whole_phase_is_shown_as_at_least_the_phase() -> None:
    stuck = rebalance.Phase("faust", "kill -9", {0: 45.0, 1: 3.0}, frozenset({0}), window=45.0)
    line = rebalance.report([stuck]).splitlines()[-1]
    assert line.split()[4:10] == [">=45", ">=45", "3.0", "1", "-", ">=15.0x"]


def test_every_variant_runs_with_the_same_session_timeout() -> None:
    args = rebalance.build_parser().parse_args(["--session-timeout", "6"])
    envs = [rebalance.variant_env(v, args) for v in rebalance.VARIANTS]
    assert {env["SJ_BENCH_SESSION_TIMEOUT"] for env in envs} == {"6.0"}
    assert envs[2]["STREAMJOIN_MAX_WARMUP_REPLICAS"] == "0"
    default = rebalance.build_parser().parse_args([])
    assert rebalance.variant_env("faust", default)["SJ_BENCH_SESSION_TIMEOUT"] == "2.0"
