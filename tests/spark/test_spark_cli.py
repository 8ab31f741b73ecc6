"""``streamjoin spark report | reconcile | run``: outputs, exit codes, bad input, as a script."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from streamjoin.ads.policy import AdAttribution
from streamjoin.cli import main
from streamjoin.join.window import JoinWindow

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
]

REPO = Path(__file__).resolve().parents[2]
#: the policy of the in-process runs (``--policy test_spark_cli:POLICY``)
POLICY = AdAttribution(JoinWindow(before=300, after=5_000, grace=1_000))
RECONCILED = "reconciled: {} clicks, {} differences"


def _events(kit: Any, window: JoinWindow, seeds: range) -> Any:
    events = kit.Events()
    for seed in seeds:
        part = kit.random_events(seed, window, auctions=8, hours=2)
        events.impressions.extend(part.impressions)
        events.clicks.extend(part.clicks)
    return events


@pytest.fixture(scope="module")
def stream(kit: Any) -> tuple[Any, list[dict[str, Any]]]:
    events = _events(kit, POLICY.window, range(60, 63))
    return events, kit.outcome_rows(kit.simulate_stream(events, POLICY.window))


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, ["spark", *args], catch_exceptions=False)


def _args(archive: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--archive",
        str(archive),
        "--out",
        str(out),
        "--policy",
        "test_spark_cli:POLICY",
        *extra,
    ]


def test_run_on_agreeing_data(spark: Any, kit: Any, stream: Any, tmp_path: Path) -> None:
    events, rows = stream
    archive = kit.write_archive(tmp_path / "archive", events, rows)
    result = _invoke("run", *_args(archive, tmp_path / "out"))
    assert result.exit_code == 0, result.output + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == RECONCILED.format(len(rows), 0)
    undecided = len(events.clicks) - len(rows)
    assert f"{undecided} undecided" in result.stdout
    assert lines[0].startswith("campaign report: ")
    assert "[spark" in result.stderr and "batch join" in result.stderr
    report = tmp_path / "out" / "report"
    totals = json.loads((report / "campaign_totals.json").read_text())
    assert sum(r["impressions"] for r in totals) == len(events.impressions)
    billed = sum(1 for r in rows if r["outcome"] == "attributed")
    assert sum(r["billed_clicks"] for r in totals) == billed
    assert (report / "campaign_hourly.csv").exists()
    summary = json.loads((tmp_path / "out" / "reconciliation" / "summary.json").read_text())
    assert summary["differences"] == 0 and summary["compared_clicks"] == len(rows)
    assert summary["undecided_clicks"] == undecided
    with (tmp_path / "out" / "reconciliation" / "differences.csv").open() as handle:
        assert list(csv.DictReader(handle)) == []


def test_reconcile_names_the_differing_rows(
    spark: Any, kit: Any, stream: Any, tmp_path: Path
) -> None:
    events, rows = stream
    rows = [dict(r) for r in rows]
    altered = next(r for r in rows if r["outcome"] == "attributed")
    altered["impression_id"] = "i-wrong"
    dropped = rows.pop(-1)
    archive = kit.write_archive(tmp_path / "archive", events, rows)
    result = _invoke("reconcile", *_args(archive, tmp_path / "out"))
    assert result.exit_code == 1, result.output + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == RECONCILED.format(len(rows) + 1, 2)
    assert sum(line.startswith("reconciled:") for line in lines) == 1
    assert f"field-mismatch {altered['click_id']}: impression_id differ" in result.stdout
    assert f"missing-in-stream {dropped['click_id']}" in result.stdout
    assert "campaign report" not in result.stdout
    with (tmp_path / "out" / "reconciliation" / "differences.csv").open() as handle:
        found = {(r["kind"], r["click_id"]) for r in csv.DictReader(handle)}
    assert found == {
        ("field-mismatch", altered["click_id"]),
        ("missing-in-stream", dropped["click_id"]),
    }


def test_report_only(spark: Any, kit: Any, stream: Any, tmp_path: Path) -> None:
    events, _ = stream
    archive = kit.write_archive(tmp_path / "archive", events, None)  # no outcomes: irrelevant
    result = _invoke("report", *_args(archive, tmp_path / "out"))
    assert result.exit_code == 0, result.output + result.stderr
    assert "reconciled:" not in result.stdout
    assert "camp-a" in result.stdout and "billed_clicks" in result.stdout
    assert not (tmp_path / "out" / "reconciliation").exists()
    assert (tmp_path / "out" / "report" / "campaign_totals.csv").exists()


def test_unreadable_archive_exits_2(spark: Any, kit: Any, stream: Any, tmp_path: Path) -> None:
    events, rows = stream
    archive = kit.write_archive(tmp_path / "archive", events, rows)
    hour_dir = next((archive / "outcomes").glob("date=*/hour=*"))
    (hour_dir / "attributed-clicks+0+900+901.parquet").write_bytes(b"garbage")
    result = _invoke("run", *_args(archive, tmp_path / "out"))
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert line.startswith("Error: cannot read outcomes")
    assert [ln for ln in result.stderr.splitlines() if not ln.startswith("[spark")] == [line]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--archive", "{tmp}/nope"], "archive directory {tmp}/nope does not exist"),
        (
            ["--policy", "streamjoin.ads.app:AdsSettings"],
            "is a AdsSettings, not a streamjoin.AdAttribution",
        ),
        (["--policy", "no_such_module_xyz:POLICY"], "cannot import policy module 'no_such_"),
        (["--policy", "test_spark_cli"], "give the policy as module:attribute"),
        (["--policy", "test_spark_cli:NOPE"], "has no attribute 'NOPE'"),
        (["--conf", "spark.x"], "expected KEY=VALUE"),
    ],
    ids=["no-archive", "not-a-policy", "no-module", "no-colon", "no-attr", "bad-conf"],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "archive").mkdir()
    argv = ["run", "--archive", str(tmp_path / "archive"), "--out", str(tmp_path / "out")]
    argv += ["--policy", "test_spark_cli:POLICY"]
    argv += [a.format(tmp=tmp_path) for a in args]
    result = _invoke(*argv)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and message.format(tmp=tmp_path) in line


def test_script_help() -> None:
    """``python streamjoin/cli/spark.py`` (what spark-submit runs) parses its arguments."""
    script = REPO / "streamjoin" / "cli" / "spark.py"
    done = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    for command in ("report", "reconcile", "run"):
        assert command in done.stdout
    done = subprocess.run(
        [sys.executable, str(script), "run", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    for option in ("--archive", "--out", "--policy", "--spark-master", "--conf"):
        assert option in done.stdout
    done = subprocess.run(
        [sys.executable, str(script), "run", "--out", "x"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "Missing option '--archive'" in done.stderr


def test_default_policy_is_the_apps(tmp_path: Path) -> None:
    from streamjoin.ads.app import AdsSettings
    from streamjoin.ads.spark.policy import DEFAULT_POLICY, load_policy
    from streamjoin.cli.spark import _DEFAULT_POLICY

    assert _DEFAULT_POLICY == DEFAULT_POLICY
    assert load_policy() == AdsSettings.from_env().policy


def _jvms_with(marker: str) -> list[int]:
    """Processes whose command line holds *marker* (no process is touched)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_end_to_end_subprocess(kit: Any, tmp_path: Path) -> None:
    """``python -m streamjoin spark run`` with the app's default policy, in its own JVM."""
    from streamjoin.ads.app import AdsSettings

    window = AdsSettings.from_env().policy.window
    events = _events(kit, window, range(70, 73))
    rows = kit.outcome_rows(kit.simulate_stream(events, window))
    archive = kit.write_archive(tmp_path / "archive", events, rows)
    marker = f"streamjoin-test-{uuid.uuid4().hex}"
    argv = [
        sys.executable,
        "-m",
        "streamjoin",
        "spark",
        "run",
        "--archive",
        str(archive),
        "--out",
        str(tmp_path / "out"),
        "--spark-master",
        "local[2]",
        "--conf",
        "spark.sql.shuffle.partitions=4",
        "--conf",
        f"spark.streamjoin.test.marker={marker}",
    ]
    env = {**os.environ, "ADS_GRACE_MS": str(window.grace)}
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == RECONCILED.format(len(rows), 0)
    assert "Spark stopped" in done.stderr
    assert "Traceback" not in done.stderr
    for name in ("campaign_totals.csv", "campaign_totals.json", "campaign_hourly.json"):
        assert (tmp_path / "out" / "report" / name).exists()
    assert (tmp_path / "out" / "reconciliation" / "differences.csv").exists()
    assert _jvms_with(marker) == []  # the driver JVM did not outlive the command


def test_records_the_stream_reported_late_are_left_out_by_the_batch_too(
    spark: Any, kit: Any, stream: Any, tmp_path: Path
) -> None:
    """An impression and a click the stream dead-lettered as late (an input was
    idle): the stream never joined them, the archive's ``late`` dataset names
    them, and the batch side leaves them out the same way: 0 differences."""
    import pyarrow as pa

    events, _ = stream
    clicked = {c["auction_id"] for c in events.clicks}
    late_imp = next(i for i in events.impressions if i["auction_id"] in clicked)
    late_click = events.clicks[len(events.clicks) // 2]

    def offset_of(rows: list[dict[str, Any]], target: dict[str, Any]) -> int:
        same = [r for r in rows if r["partition"] == target["partition"]]
        return next(n for n, r in enumerate(same) if r is target)

    kept = kit.Events()
    kept.impressions.extend(i for i in events.impressions if i is not late_imp)
    kept.clicks.extend(c for c in events.clicks if c is not late_click)
    rows = kit.outcome_rows(kit.simulate_stream(kept, POLICY.window))
    archive = kit.write_archive(tmp_path / "archive", events, rows)
    late_rows = []
    for dataset, record, side in (
        ("impressions", late_imp, "impression"),
        ("clicks", late_click, "click"),
    ):
        decided = record["ts_ms"] + 9_999
        reason = f"late: {side} record ts_ms {record['ts_ms']} + grace 1000 ms is below {decided}"
        late_rows.append(
            {
                "input": dataset,
                "ts_ms": record["ts_ms"],
                "input_topic": dataset,
                "input_partition": record["partition"],
                "input_offset": offset_of(getattr(events, dataset), record),
                "reason": reason,
                "partition": 0,
            }
        )
    schema = pa.schema(
        [
            ("input", pa.string()),
            ("ts_ms", pa.int64()),
            ("input_topic", pa.string()),
            ("input_partition", pa.int32()),
            ("input_offset", pa.int64()),
            ("reason", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
        ]
    )
    result = _invoke("reconcile", *_args(archive, tmp_path / "without"))
    assert result.exit_code == 1  # without the late dataset, batch and stream disagree
    kit.write_dataset(archive, "late", late_rows, schema, topic="ads-dead-letters")
    result = _invoke("run", *_args(archive, tmp_path / "out"))
    assert result.exit_code == 0, result.output + result.stderr
    assert result.stdout.strip().splitlines()[-1] == RECONCILED.format(len(rows), 0)
    assert "2 records the stream reported late left out" in result.stdout
    assert "1 impressions, 1 clicks" in result.stderr
    summary = json.loads((tmp_path / "out" / "reconciliation" / "summary.json").read_text())
    assert summary["late_records"] == {"impressions": 1, "clicks": 1}
