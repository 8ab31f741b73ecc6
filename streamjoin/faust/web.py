"""The worker's assignment, as JSON on its web port."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from faust.types import AppT
    from faust.web import Request, Response, View

__all__ = ["ASSIGNMENT_PATH", "JOINS_PATH", "add_assignment_page", "add_joins_page"]

#: where ``GET`` returns the worker's current assignment
ASSIGNMENT_PATH = "/streamjoin/assignment/"
#: where ``GET`` returns every join's tasks and counters on the worker
JOINS_PATH = "/streamjoin/joins/"


def add_assignment_page(app: AppT) -> None:
    """Serve ``app.assignor.describe()`` at :data:`ASSIGNMENT_PATH`, with the last
    changelog offset applied to each standby and global table partition
    (``standby_offsets``, ``global_offsets``), the records each standby, warm-up
    and global table partition is behind its changelog's end
    (``changelog_lags``) and the follow-up rebalances this worker requested
    (``followup_rebalance_requests``), when each task became ready this
    generation (``restored_at``) and how the standby follower kept to its share
    of the time (``standby_pacing``) when streamjoin's TableManager runs.

    :class:`streamjoin.App` calls this itself; a plain faust app using
    ``streamjoin:PartitionAssignor`` can call it once after creating the app.
    The page answers only when the web server runs (``--with-web``).
    """

    async def assignment(web: View, request: Request) -> Response:
        describe = getattr(app.assignor, "describe", None)
        if describe is None:
            return web.json(
                {"error": "the app does not use streamjoin:PartitionAssignor"}, status=404
            )
        doc = describe()
        recovery = getattr(getattr(app, "tables", None), "recovery", None)
        for name in ("standby_offsets", "global_offsets", "changelog_lags"):
            read = getattr(recovery, name, None)
            if read is not None:
                # "topic" -> {partition: last applied changelog offset / records behind}
                by_topic: dict[str, dict[int, int | None]] = {}
                for (topic, partition), offset in read().items():
                    by_topic.setdefault(topic, {})[partition] = offset
                doc[name] = by_topic
        watch = getattr(recovery, "warmups", None)
        if watch is not None:
            doc["followup_rebalance_requests"] = watch.requests
        ready = getattr(recovery, "restored_at", None)
        if ready is not None:
            # task (partition) -> time.time() it became ready this generation; an
            # active task missing here is still being restored (not processing)
            doc["restored_at"] = ready()
        pacing = getattr(recovery, "standby_pacing", None)
        if pacing is not None:
            doc["standby_pacing"] = pacing()
        return web.json(doc)

    app.page(ASSIGNMENT_PATH, name="streamjoin-assignment")(assignment)


def add_joins_page(app: AppT) -> None:
    """Serve ``{name: join.describe()}`` of ``app.joins`` at :data:`JOINS_PATH`."""

    async def joins(web: View, request: Request) -> Response:
        found = getattr(app, "joins", {}) or {}
        return web.json({name: found[name].describe() for name in sorted(found)})

    app.page(JOINS_PATH, name="streamjoin-joins")(joins)
