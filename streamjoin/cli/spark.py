"""``streamjoin spark report | reconcile | run``: the batch side on Apache Spark.

Reads the Parquet archive, joins impressions and clicks with the stream's
policy, writes the campaign report and/or reconciles the stream's outcomes
against the batch's. Also runnable as a script, e.g. on a cluster::

    spark-submit streamjoin/cli/spark.py run --archive hdfs:///ads/archive --out ./out

Exit status: 0 done (reconciliation: no differences); 1 the reconciliation
found differences; 2 bad input or a failed Spark job (one line on stderr).

PySpark is imported only when a command runs, so ``streamjoin --help`` and
the other commands do not need it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

__all__ = ["spark_command"]

from streamjoin.ads.spark.policy import DEFAULT_POLICY as _DEFAULT_POLICY


class BadInput(click.ClickException):
    """Bad input or a failed Spark job: one line on stderr, exit status 2."""

    exit_code = 2


def _common_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--archive",
            required=True,
            metavar="DIR",
            help="The archive's root (impressions/, clicks/, outcomes/); a path or Hadoop URI.",
        ),
        click.option(
            "--out",
            required=True,
            metavar="DIR",
            type=click.Path(file_okay=False, path_type=Path),
            help="Local directory for report/ and reconciliation/ (created if needed).",
        ),
        click.option(
            "--policy",
            default=_DEFAULT_POLICY,
            show_default=True,
            metavar="MODULE:ATTR",
            help="The stream's AdAttribution policy (its window decides matches).",
        ),
        click.option(
            "--spark-master",
            default=None,
            metavar="URL",
            help="Spark master URL [default: local[*], or spark-submit's --master].",
        ),
        click.option(
            "--conf",
            "confs",
            multiple=True,
            metavar="KEY=VALUE",
            help="A Spark setting (repeatable), e.g. --conf spark.driver.memory=4g.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@click.group("spark", context_settings={"help_option_names": ["-h", "--help"]})
def spark_command() -> None:
    """Batch side on Apache Spark: campaign report and reconciliation.

    Every command reads the archive (ARCHIVE/impressions, clicks, outcomes,
    Parquet), attributes every click with the stream's rules and policy, and
    keeps the clicks whose outcome is final at the end of the archive.
    """


@spark_command.command("report")
@_common_options
def report_command(**options: Any) -> None:
    """Campaign report: impressions, billed clicks, CTR, spend, CPC per campaign and hour.

    Writes OUT/report/ (CSV and JSON) and prints the per-campaign table.
    """
    sys.exit(_run_job(("report",), **options))


@spark_command.command("reconcile")
@_common_options
def reconcile_command(**options: Any) -> None:
    """Compare the stream's outcomes with the batch join's, click by click.

    Writes OUT/reconciliation/ (differences.csv, summary.json) and ends with
    the line "reconciled: N clicks, D differences". Exit 1 when D > 0.
    """
    sys.exit(_run_job(("reconcile",), **options))


@spark_command.command("run")
@_common_options
def run_command(**options: Any) -> None:
    """Both: the campaign report, then the reconciliation (exit 1 on differences)."""
    sys.exit(_run_job(("report", "reconcile"), **options))


class _Progress:
    """One line per stage on stderr, with the time since the command started."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def __call__(self, message: str) -> None:
        click.echo(f"[spark {time.monotonic() - self.start:6.1f}s] {message}", err=True)


def _parse_conf(values: Sequence[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--conf {value!r}: expected KEY=VALUE, e.g. spark.driver.memory=4g")
        conf[key.strip()] = setting
    return conf


def _is_local(location: str) -> bool:
    scheme, sep, _ = location.partition("://")
    return not sep or scheme == "file"


def _run_job(
    steps: Sequence[str],
    archive: str,
    out: Path,
    policy: str,
    spark_master: str | None,
    confs: Sequence[str],
) -> int:
    from streamjoin.ads.errors import AdsError
    from streamjoin.ads.spark.policy import load_policy
    from streamjoin.ads.spark.session import describe

    progress = _Progress()
    conf = _parse_conf(confs)
    try:
        ad_policy = load_policy(policy)
    except AdsError as exc:
        raise BadInput(str(exc)) from None
    if _is_local(archive):
        local = Path(archive.removeprefix("file://"))
        if not local.is_dir():
            what = "is not a directory" if local.exists() else "does not exist"
            raise BadInput(f"archive directory {archive} {what}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--out {out}: {exc.strerror or exc}") from None

    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise BadInput(
            "PySpark is not installed: pip install 'streamjoin[spark]' (and a Java 17 runtime)"
        ) from None
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    from streamjoin.ads.spark.session import spark_session

    progress(f"starting Spark (master {spark_master or 'default'})")
    try:
        with spark_session(spark_master, conf) as spark:
            progress(f"Spark {spark.version} up, master {spark.sparkContext.master}")
            code = _job(spark, steps, archive, out, policy, ad_policy, progress)
        progress("Spark stopped")
        return code
    except AdsError as exc:
        raise BadInput(str(exc)) from None
    except (PySparkException, Py4JError) as exc:
        raise BadInput(f"Spark job failed: {describe(exc)}") from None


def _job(
    spark: Any,
    steps: Sequence[str],
    archive_root: str,
    out: Path,
    policy_spec: str,
    policy: Any,
    progress: Callable[[str], None],
) -> int:
    from streamjoin.ads.spark.archive import read_archive
    from streamjoin.ads.spark.attribution import attribute_batch, decided_clicks

    window = policy.window
    progress(f"reading archive {archive_root}")
    archive = read_archive(spark, archive_root)
    sizes = _archive_sizes(archive, archive_root, progress)
    impressions, clicks, late = _without_late(archive, sizes, progress)
    progress(
        f"batch join (window before={window.before} after={window.after} grace={window.grace} ms)"
    )
    batch = attribute_batch(spark, impressions, clicks, policy).cache()
    decided = decided_clicks(impressions, clicks, policy).cache()
    n_batch = batch.count()
    n_decided = decided.count()
    progress(f"batch outcomes: {n_batch} clicks, {n_decided} decided, {n_batch - n_decided} not")
    final = batch.join(decided.select("click_id"), "click_id", "left_semi")
    meta = {
        "archive": archive_root,
        "policy": policy_spec,
        "window_ms": {"before": window.before, "after": window.after, "grace": window.grace},
        "decided_clicks": n_decided,
        "undecided_clicks": n_batch - n_decided,
        "late_records": late,
    }
    code = 0
    if "report" in steps:
        _report(archive.impressions, final, out / "report", meta, progress)
    if "reconcile" in steps:
        code = _reconcile(archive, clicks, batch, decided, out / "reconciliation", meta, progress)
    return code


def _archive_sizes(
    archive: Any, archive_root: str, progress: Callable[[str], None]
) -> dict[str, int]:
    """The archive's row counts, which also prove it readable (``ArchiveError`` if not)."""
    from streamjoin.ads.errors import ArchiveError
    from streamjoin.ads.spark.session import describe

    try:
        sizes = {
            "impressions": archive.impressions.count(),
            "clicks": archive.clicks.count(),
            "outcomes": archive.outcomes.count(),
            "late": archive.late.count(),
        }
    except Exception as exc:
        raise ArchiveError(f"cannot read the archive {archive_root}: {describe(exc)}") from None
    missing = f"; missing (read as empty): {', '.join(archive.missing)}" if archive.missing else ""
    progress(
        f"archive: {sizes['impressions']} impressions, {sizes['clicks']} clicks, "
        f"{sizes['outcomes']} outcome rows in {sum(archive.files.values())} files{missing}"
    )
    return sizes


def _without_late(
    archive: Any, sizes: dict[str, int], progress: Callable[[str], None]
) -> tuple[Any, Any, dict[str, int]]:
    """The impressions and clicks (cached) without the records the stream reported late,
    left out exactly as the stream did, and how many of each that left out."""
    from streamjoin.ads.spark.attribution import without_late

    impressions = without_late(archive.impressions, archive.late, "impressions").cache()
    clicks = without_late(archive.clicks, archive.late, "clicks").cache()
    late = {
        "impressions": sizes["impressions"] - impressions.count(),
        "clicks": sizes["clicks"] - clicks.count(),
    }
    progress(
        f"late records left out as the stream did: {late['impressions']} impressions, "
        f"{late['clicks']} clicks"
    )
    return impressions, clicks, late


def _report(
    impressions: Any,
    final: Any,
    directory: Path,
    meta: dict[str, Any],
    progress: Callable[[str], None],
) -> None:
    from streamjoin.ads.spark.report import (
        HOURLY_COLUMNS,
        TOTAL_COLUMNS,
        campaign_report,
        collect_rows,
        format_table,
        write_report,
    )

    progress("campaign report")
    hourly, totals = collect_rows(campaign_report(impressions, final))
    write_report(hourly, totals, directory, meta)
    shown = sum(r["impressions"] for r in totals)
    billed = sum(r["billed_clicks"] for r in totals)
    click.echo(
        f"campaign report: {len(totals)} campaigns, {shown} impressions, {billed} billed clicks "
        f"(decided clicks only; {meta['undecided_clicks']} undecided left out)"
    )
    click.echo(format_table(totals, TOTAL_COLUMNS))
    if len(hourly) <= 48:
        click.echo("")
        click.echo(format_table(hourly, HOURLY_COLUMNS))
    else:
        click.echo(f"({len(hourly)} campaign-hours: see campaign_hourly.csv)")
    click.echo(f"report written to {directory}/")


def _reconcile(
    archive: Any,
    clicks: Any,
    batch: Any,
    decided: Any,
    directory: Path,
    meta: dict[str, Any],
    progress: Callable[[str], None],
) -> int:
    from streamjoin.ads.spark.reconciliation import KINDS, reconcile, write_differences

    progress("reconciliation")
    result = reconcile(archive.outcomes, batch, clicks, decided)
    csv_path, _, first = write_differences(result, directory, meta)
    late = meta["late_records"]
    click.echo(
        f"reconciliation: {result.compared} decided clicks compared, "
        f"{result.undecided} undecided at the end of the archive left out, "
        f"{late['impressions'] + late['clicks']} records the stream reported late left out"
    )
    click.echo(
        f"stream outcomes: {result.stream_rows} rows for {result.stream_clicks} clicks "
        f"({result.stream_rows - result.stream_clicks} replayed rows)"
    )
    for kind in KINDS:
        click.echo(f"  {kind}: {result.counts[kind]}")
    for row in first:
        click.echo(f"  {_describe_difference(row)}")
    if result.total > len(first):
        click.echo(f"  ... {result.total - len(first)} more")
    click.echo(f"differences written to {csv_path}")
    click.echo(f"reconciled: {result.compared} clicks, {result.total} differences")
    return 1 if result.total else 0


def _describe_difference(row: dict[str, Any]) -> str:
    def side(name: str) -> str:
        values = [row[f"{name}_{f}"] for f in ("outcome", "impression_id", "campaign", "cost")]
        return " ".join("-" if v is None else str(v) for v in values)

    head = f"{row['kind']} {row['click_id']}"
    if row["kind"] == "field-mismatch":
        fields = row["fields"].replace(";", ", ")
        return f"{head}: {fields} differ (stream: {side('stream')}; batch: {side('batch')})"
    if row["kind"] == "missing-in-stream":
        return f"{head}: batch says {side('batch')}"
    if row["kind"] == "extra-in-stream":
        return f"{head}: stream says {side('stream')} ({row['detail']})"
    return f"{head}: {row['detail']}"


def _script_paths() -> None:
    """Make ``python streamjoin/cli/spark.py`` import the package, not its siblings."""
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    try:
        import streamjoin  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(here.parent.parent))


if __name__ == "__main__":
    _script_paths()
    spark_command()
