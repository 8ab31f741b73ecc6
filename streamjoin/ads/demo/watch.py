"""Watching the running workers: periodic samples and the live console view.

:func:`sample_workers` polls every running worker's web pages
(``/streamjoin/assignment/`` and ``/streamjoin/joins/``) into the run's
:class:`~streamjoin.ads.demo.state.DemoState` (with the group generation and
how each task of the billing join processed: :func:`task_paces`);
:func:`live_view` prints one line per worker (status, tasks, standbys,
records processed, restore progress, the tasks it is restoring and warming up).
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from streamjoin.ads.demo.state import DemoState, Worker, say
from streamjoin.ads.demo.timeline import Pace, Sample

__all__ = [
    "INPUT_TOPIC",
    "live_view",
    "restore_progress",
    "restore_state",
    "sample_workers",
    "task_paces",
]

#: the topic whose partitions are the tasks shown as a worker's tasks
INPUT_TOPIC = "impressions"
RESTORING = re.compile(r"restoring table (\S+): ([\d,]+)/([\d,]+) records")


def _get_json(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return json.loads(response.read())


def sample_workers(state: DemoState, workers: Sequence[Worker]) -> None:
    """Record every running worker's tasks (a :class:`Sample`) and latest figures.

    A worker whose pages do not answer (starting, stopping) is skipped.
    """
    t = state.now()
    for worker in workers:
        if not worker.process.running():
            continue
        try:
            assignment = _get_json(worker.web_port, "/streamjoin/assignment/")
            joins = _get_json(worker.web_port, "/streamjoin/joins/")
        except (OSError, ValueError):
            continue
        tasks = tuple(sorted(assignment.get("actives", {}).get(INPUT_TOPIC, [])))
        restoring, warmups = restore_state(assignment, tasks)
        billing = joins.get("billing", {})
        paces = task_paces(billing)
        generation = assignment.get("generation")
        state.samples.append(
            Sample(
                t,
                worker.name,
                tasks,
                restoring,
                warmups,
                paces,
                generation if isinstance(generation, int) else None,
                tuple((float(a), float(b)) for a, b in assignment.get("rebalances", ())),
            )
        )
        standby = assignment.get("standbys", {})
        state.stats[worker.name] = {
            "tasks": tasks,
            "restoring": restoring,
            "warmups": warmups,
            "standbys": tuple(sorted({p for ps in standby.values() for p in ps})),
            "stats": billing.get("stats", {}),
            "buffered": sum(t.get("buffered", 0) for t in billing.get("tasks", {}).values()),
        }


def restore_state(
    assignment: Mapping[str, Any], tasks: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(restoring, warmups)`` of a worker from its assignment page.

    Restoring: those of *tasks* (its actives) not ready yet this generation
    (missing from ``restored_at``; nothing is marked when the page has no
    ``restored_at``: a TableManager other than streamjoin's). Warm-ups: every
    partition listed under ``warmups``, whichever changelog.
    """
    ready = assignment.get("restored_at")
    restoring: tuple[int, ...] = ()
    if isinstance(ready, Mapping):
        done = {int(p) for p in ready}
        restoring = tuple(p for p in tasks if p not in done)
    warm = assignment.get("warmups") or {}
    warmups = tuple(sorted({int(p) for ps in warm.values() for p in ps}))
    return restoring, warmups


def task_paces(join: Mapping[str, Any]) -> tuple[Pace, ...]:
    """How each task of a join processed, from its entry on the joins page
    (``processed``, ``processing``, ``stops``; a worker without them: none)."""
    paces = []
    for key, task in sorted(join.get("tasks", {}).items(), key=lambda item: int(item[0])):
        processing = task.get("processing")
        paces.append(
            Pace(
                int(key),
                int(task.get("processed", 0)),
                None if not processing else (float(processing[0]), float(processing[1])),
                tuple((float(a), float(b)) for a, b in task.get("stops", ())),
            )
        )
    return tuple(paces)


def live_view(
    state: DemoState, workers: Sequence[Worker], generator: subprocess.Popen[bytes] | None
) -> None:
    """Print the generator's status and one line per worker."""
    rows = []
    for worker in workers:
        info = state.stats.get(worker.name, {})
        stats = info.get("stats", {})
        status = (
            "killed"
            if worker.killed_at is not None
            else ("running" if worker.process.running() else "stopped")
        )
        restore = restore_progress(worker.process.log_text(since_start=False))
        marks = "".join(
            f" {label} {list(info[key])}"
            for key, label in (("restoring", "restoring"), ("warmups", "warm-ups"))
            if info.get(key)
        )
        rows.append(
            f"  {worker.name:<4} {status:<8} tasks {list(info.get('tasks', ()))!s:<14} "
            f"standbys {list(info.get('standbys', ()))!s:<14} "
            f"processed {stats.get('processed', 0):>8,} buffered {info.get('buffered', 0):>5,}"
            f"{'  ' + restore if restore else ''}{marks}"
        )
    gen = "running" if generator is not None and generator.poll() is None else "done"
    say(f"[{state.now():6.1f}s] generator {gen}")
    for row in rows:
        say(row)


def restore_progress(log: str) -> str:
    """A progress bar of the last table restore in a worker's log; ``""`` when none
    is under way."""
    last = None
    for found in RESTORING.finditer(log[-20_000:]):
        last = found
    if last is None:
        return ""
    done, total = (int(x.replace(",", "")) for x in last.group(2, 3))
    if total == 0 or done >= total:
        return ""
    filled = int(20 * done / total)
    return f"restoring [{'#' * filled}{'.' * (20 - filled)}] {done:,}/{total:,}"
