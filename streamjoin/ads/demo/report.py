"""The demo's HTML report and its PNG charts (matplotlib, no display needed).

The task chart shows which worker ran which task, restoring and warm-up
stretches, and where a task stopped (processed nothing for more than
:data:`~streamjoin.join.activity.STOP_SECONDS`); the page's table
"Rebalances: kept and moved tasks" gives, per rebalance, how long the tasks
that kept their worker stopped and how long the moved ones went unprocessed
and how long tasks stopped away from any rebalance
(:func:`~streamjoin.ads.demo.stops.rebalance_outcomes`). The lag chart is drawn
from the workers' own ``/metrics`` pages, scraped during the run
(:mod:`~streamjoin.ads.demo.scrape`).
"""

from __future__ import annotations

import csv
import html
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streamjoin.ads.demo.scrape import ScrapeRecord, lag_section
from streamjoin.ads.demo.state import GENERATOR_DONE
from streamjoin.ads.demo.stops import (
    AROUND,
    RebalanceOutcome,
    rebalance_outcomes,
    stop_intervals,
    stops_away,
)
from streamjoin.ads.demo.timeline import (
    Interval,
    Sample,
    longest_restoring,
    ownership_intervals,
    rebalances,
    restoring_intervals,
    warmup_intervals,
)
from streamjoin.join.activity import STOP_SECONDS

__all__ = ["PALETTE", "campaign_totals", "write_report"]

#: each worker's colour, by its name's rank, on every chart
PALETTE = ("#3b7dd8", "#e07b39", "#4caf50", "#9c27b0", "#795548", "#00897b")


def _colours(workers: Sequence[str]) -> dict[str, str]:
    return {w: PALETTE[n % len(PALETTE)] for n, w in enumerate(sorted(workers))}


def campaign_totals(report_dir: Path) -> list[dict[str, Any]]:
    """Per-campaign totals from the Spark report (``campaign_totals.json`` or ``.csv``)."""
    for name in ("campaign_totals.json", "totals.json"):
        path = report_dir / name
        if path.exists():
            data = json.loads(path.read_text())
            rows = data if isinstance(data, list) else data.get("rows", [])
            return sorted(rows, key=lambda r: str(r.get("campaign")))
    for name in ("campaign_totals.csv", "totals.csv"):
        path = report_dir / name
        if path.exists():
            with path.open() as handle:
                return sorted(csv.DictReader(handle), key=lambda r: str(r.get("campaign")))
    return []


def _num(row: dict[str, Any], *names: str) -> float:
    for name in names:
        value = row.get(name)
        if value not in (None, ""):
            return float(value)
    return 0.0


def _campaign_chart(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [str(r["campaign"]) for r in rows]
    ctr = [100 * _num(r, "ctr") for r in rows]
    spend = [_num(r, "spend") for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.bar(names, ctr, color="#3b7dd8")
    left.set_title("CTR per campaign (billed clicks / impressions)")
    left.set_ylabel("%")
    right.bar(names, spend, color="#e07b39")
    right.set_title("Spend per campaign")
    right.set_ylabel("currency units")
    for axis in (left, right):
        axis.tick_params(axis="x", rotation=45)
        axis.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _timeline_chart(
    samples: Sequence[Sample],
    events: Sequence[tuple[float, str]],
    end: float,
    path: Path,
    stops: tuple[float, Sequence[RebalanceOutcome]] = (0.0, ()),
) -> None:
    """The task chart; *stops*: ``time.time()`` at the demo's start and the
    rebalances' outcomes, whose stops and handovers are marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    intervals = ownership_intervals(samples, end)
    workers = sorted({i.worker for i in intervals})
    colour = _colours(workers)
    tasks = sorted({i.task for i in intervals})
    fig, axis = plt.subplots(figsize=(11, 0.5 * max(len(tasks), 4) + 1.6))
    for interval in intervals:
        axis.barh(
            interval.task,
            interval.end - interval.start,
            left=interval.start,
            color=colour[interval.worker],
            edgecolor="white",
            height=0.8,
        )
    _restore_bars(axis, samples, end, colour)
    _stop_marks(axis, samples, end, *stops)
    for t in rebalances(samples):
        axis.axvline(t, color="grey", linestyle=":", linewidth=1)
    top = max(tasks, default=0) + 0.45
    for t, label in events:
        if label.startswith(("w1 ", "w2 ", "w3 ")) and "killed" not in label:
            continue  # the first three start together, before the generator
        colour_of = "red" if "killed" in label else "darkgreen"
        axis.axvline(t, color=colour_of, linewidth=1.5)
        axis.text(
            t,
            top,
            f" {label} ",
            rotation=90,
            va="top",
            ha="right",
            fontsize=8,
            color=colour_of,
            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1},
        )
    axis.set_yticks(tasks, [f"task {t}" for t in tasks])
    axis.set_xlabel("seconds since start (dotted: a task changed owner)")
    axis.set_title("Which worker ran which task")
    _timeline_legend(axis, workers, colour)
    axis.set_xlim(0, max(end, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _timeline_legend(axis: Any, workers: Sequence[str], colour: dict[str, str]) -> None:
    """The task chart's legend: each worker's colour, then the hatches and the stop mark."""
    from matplotlib.patches import Rectangle

    handles = [Rectangle((0, 0), 1, 1, color=colour[w]) for w in workers]
    handles += [
        Rectangle((0, 0), 1, 1, facecolor="white", edgecolor=RESTORING_COLOUR, hatch="///"),
        Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", hatch="..."),
        Rectangle((0, 0), 1, 1, color=STOP_COLOUR),
    ]
    labels = [
        *workers,
        "restoring (unavailable)",
        "warm-up (worker's colour)",
        f"stopped > {STOP_SECONDS:g} s",
    ]
    axis.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8)


#: edge colour of the hatched bars of restoring tasks
RESTORING_COLOUR = "#c62828"


def _restore_bars(axis: Any, samples: Sequence[Sample], end: float, colour: dict[str, str]) -> None:
    """Hatched bars over the timeline: a task restoring on its owner (it processes
    nothing) over the task's bar, a warm-up as a thin bar under it in the
    colour of the worker warming it up."""
    for bar in restoring_intervals(samples, end):
        axis.barh(
            bar.task,
            bar.end - bar.start,
            left=bar.start,
            color="none",
            edgecolor=RESTORING_COLOUR,
            hatch="///",
            height=0.8,
            linewidth=0.8,
        )
    for bar in warmup_intervals(samples, end):
        axis.barh(
            bar.task - 0.3,
            bar.end - bar.start,
            left=bar.start,
            color=colour.get(bar.worker, "grey"),
            hatch="...",
            edgecolor="black",
            linewidth=0.5,
            height=0.22,
        )


#: colour of the marks where a task processed nothing for more than STOP_SECONDS
STOP_COLOUR = "#d50000"


def _stop_marks(
    axis: Any,
    samples: Sequence[Sample],
    end: float,
    wall_start: float,
    outcomes: Sequence[RebalanceOutcome],
) -> None:
    """Red marks along the top of a task's row where it stopped: on its worker
    (the stops its joins page reported) and between two owners (a handover).
    A mark is at least a pixel or two wide, however short the stop."""
    least = max(end, 1) / 600
    spans = [(s.task, s.start, s.end) for s in stop_intervals(samples, wall_start)]
    spans += [
        (h.task, h.start, h.end)
        for outcome in outcomes
        for h in outcome.moved.values()
        if h.start is not None and h.end is not None
    ]
    for task, start, stop in spans:
        axis.barh(
            task + 0.3,
            max(stop - start, least),
            left=start,
            color=STOP_COLOUR,
            height=0.18,
            linewidth=0,
        )


def _stop(stop: Interval) -> str:
    return f"task {stop.task} on {html.escape(stop.worker)}: {stop.end - stop.start:.2f} s " + (
        f"at {stop.start:.1f} s"
    )


def _rebalance_row(outcome: RebalanceOutcome) -> str:
    """One rebalance as a table row."""
    longest = outcome.longest_kept_stop()
    if outcome.kept:
        stop = f"none over {STOP_SECONDS:g} s" if longest is None else _stop(longest)
    else:
        stop = "not known"
    unseen = len(outcome.unseen)
    kept = f"{len(outcome.kept) + unseen}" + (f" ({unseen} not shown)" if unseen else "")
    moved = ", ".join(
        f"{h.task} {html.escape(h.source)}&rarr;{html.escape(h.target)}: "
        + ("?" if h.seconds is None else f"{h.seconds:.2f} s")
        for h in outcome.moved.values()
    )
    handover = outcome.longest_handover()
    low, high = outcome.generations or (None, None)
    through = "-"
    if outcome.through and outcome.rebalancing is not None:
        ran = sorted(task for task, yes in outcome.through.items() if yes)
        through = f"{len(ran)} of {len(outcome.through)} ({outcome.rebalancing:.2f} s)"
        paused = sorted(set(outcome.through) - set(ran))
        if paused:
            through += "; paused: " + ", ".join(str(task) for task in paused)
    cells = [
        f"{outcome.began:.1f}&ndash;{outcome.t:.1f} s",
        "-" if low is None else (f"{low}" if low == high else f"{low}&ndash;{high}"),
        html.escape(outcome.cause or "-"),
        kept,
        through,
        stop,
        moved or "none",
        "-" if handover is None else f"task {handover.task}: {handover.seconds:.2f} s",
    ]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _rebalance_table(outcomes: Sequence[RebalanceOutcome], away: Sequence[Interval]) -> str:
    """The section "Rebalances: kept and moved tasks" (HTML); *away*: the
    stops outside every rebalance, to compare with."""
    head = (
        "<h2>Rebalances: kept and moved tasks</h2>\n<p>Each rebalance (rounds in which "
        "the group generation rose or a task had a new owner): the tasks that kept their "
        "worker and the longest one of them stopped (processed nothing for more than "
        f"{STOP_SECONDS:g} s) from {AROUND:g} s before it began to {AROUND:g} s after it "
        "ended, and the tasks that moved with how long no worker processed each (from its "
        "old owner's last step seen to its new owner's first). Times are the workers' own, "
        "to the millisecond; the pages are read once a second, so a killed worker's last "
        "second is not seen (its tasks' handovers may start up to that much early).</p>\n"
        "<p><em>Ran through</em>: of the kept tasks whose worker's rebalance could be seen, how "
        "many processed records while their worker was rebalancing (from its first JoinGroup to "
        "the assignment it got; in brackets the longest such span). An eager rebalance revokes "
        "every task first: there none would. A stop alone does not tell a paused task from a busy "
        "machine; this does. Spans begun once the generator was done are not counted.</p>\n"
    )
    if away:
        worst = max(away, key=lambda s: s.end - s.start)
        median = statistics.median(s.end - s.start for s in away)
        baseline = (
            f"<p>Away from the rebalances, tasks stopped {len(away)} times, {median:.2f} s "
            f"at the median, the longest {_stop(worst)}: a stop may also be a slow batch "
            "or an input with nothing to deliver.</p>"
        )
    else:
        baseline = "<p>Away from the rebalances, no task stopped.</p>"
    if not outcomes:
        return head + "<p>No rebalance while tasks processed.</p>" + baseline
    return (
        head
        + "<table><tr><th>when</th><th>generation</th><th>last event before</th>"
        + "<th>tasks kept</th><th>ran through</th><th>longest stop of a kept task</th>"
        + "<th>tasks moved: handover</th><th>longest handover</th></tr>"
        + "".join(_rebalance_row(o) for o in outcomes)
        + "</table>"
        + baseline
    )


# long because: it lays out the whole HTML page: one f-string, in reading order
def write_report(
    out: Path,
    *,
    samples: Sequence[Sample],
    events: Sequence[tuple[float, str]],
    end: float,
    verdict: str | None,
    options: Any,
    wall_start: float,
    scraped: ScrapeRecord | None = None,
) -> Path:
    """Write ``out/report/index.html`` with the campaign and task charts, and
    ``rebalances.json`` (each rebalance's
    :meth:`~streamjoin.ads.demo.stops.RebalanceOutcome.as_dict`); return the
    page's path.

    *wall_start*: ``time.time()`` when the demo started (the workers report
    their tasks' stops in wall-clock seconds); *scraped*: the scrapes of the
    workers' ``/metrics`` (``None``: none taken), drawn as ``lag.png`` and
    written as ``metrics.json``."""
    report = out / "report"
    report.mkdir(exist_ok=True)
    rows = campaign_totals(report)
    if rows:
        _campaign_chart(rows, report / "campaigns.png")
    outcomes = rebalance_outcomes(samples, events, wall_start, input_done=GENERATOR_DONE)
    summary = [outcome.as_dict() for outcome in outcomes]
    (report / "rebalances.json").write_text(json.dumps(summary, indent=1))
    _timeline_chart(samples, events, end, report / "tasks.png", (wall_start, outcomes))
    cells = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(_fmt(r.get(k)))}</td>"
            for k in ("campaign", "impressions", "billed_clicks", "ctr", "spend", "cpc")
        )
        + "</tr>"
        for r in rows
    )
    timeline = "".join(f"<li>{t:.1f} s: {html.escape(label)}</li>" for t, label in events)
    longest = longest_restoring(samples, end)
    restoring = (
        "<p>Longest time each task was restoring on its owner (processing nothing), "
        "to one sampling interval: "
        + ", ".join(f"task {task} {seconds:.0f} s" for task, seconds in longest.items())
        + ".</p>"
        if longest
        else "<p>No task was seen restoring on its owner.</p>"
    )
    ok = verdict is not None and verdict.endswith(" 0 differences")
    lag = lag_section(report, scraped, events, end, _colours)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>streamjoin demo report</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
.ok{{color:#2e7d32}}.bad{{color:#c62828}}</style></head><body>
<h1>streamjoin: ad monetization demo</h1>
<p>seed {options.seed}, {options.duration:.0f} s of events at {options.speed:g}x event time,
{options.partitions} tasks, 1 standby per task.</p>
<h2 class="{"ok" if ok else "bad"}">{html.escape(verdict or "no reconciliation verdict")}</h2>
<p>The stream's outcome of every decided click, compared with Spark's batch join of the
archived events (same window, same rules).</p>
<h2>Campaigns</h2>
<img src="campaigns.png" alt="CTR and spend per campaign" width="1000">
<table><tr><th>campaign</th><th>impressions</th><th>billed clicks</th><th>CTR</th>
<th>spend</th><th>CPC</th></tr>{cells}</table>
<h2>Tasks over time</h2>
<img src="tasks.png" alt="which worker ran which task" width="1000">
<p>Hatched red: the task's owner was restoring its state (the task was unavailable);
thin dotted bars: a worker warming a task's state up while it ran elsewhere; red marks
along the top of a bar: the task processed nothing for more than {STOP_SECONDS:g} s
(on its worker, or between two owners).</p>
{restoring}
{_rebalance_table(outcomes, stops_away(samples, outcomes, wall_start))}
{lag}
<ul>{timeline}</ul>
</body></html>
"""
    path = report / "index.html"
    path.write_text(page)
    return path


def _fmt(value: Any) -> str:
    if value in (None, ""):
        return "-"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if number.is_integer() and abs(number) >= 1:
        return f"{int(number):,}"
    return f"{number:.4f}"
