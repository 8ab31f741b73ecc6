"""The worker's assignment, as JSON on its web port."""

from __future__ import annotations

from typing import Any

__all__ = ["ASSIGNMENT_PATH", "JOINS_PATH", "add_assignment_page", "add_joins_page"]

#: where ``GET`` returns the worker's current assignment
ASSIGNMENT_PATH = "/streamjoin/assignment/"
#: where ``GET`` returns every join's tasks and counters on the worker
JOINS_PATH = "/streamjoin/joins/"


def add_assignment_page(app: Any) -> None:
    """Serve ``app.assignor.describe()`` at :data:`ASSIGNMENT_PATH`.

    :class:`streamjoin.App` calls this itself; a plain faust app using
    ``streamjoin:PartitionAssignor`` can call it once after creating the app.
    The page answers only when the web server runs (``--with-web``).
    """

    async def assignment(web: Any, request: Any) -> Any:
        describe = getattr(app.assignor, "describe", None)
        if describe is None:
            return web.json(
                {"error": "the app does not use streamjoin:PartitionAssignor"}, status=404
            )
        return web.json(describe())

    app.page(ASSIGNMENT_PATH, name="streamjoin-assignment")(assignment)


def add_joins_page(app: Any) -> None:
    """Serve ``{name: join.describe()}`` of ``app.joins`` at :data:`JOINS_PATH`."""

    async def joins(web: Any, request: Any) -> Any:
        found = getattr(app, "joins", {}) or {}
        return web.json({name: found[name].describe() for name in sorted(found)})

    app.page(JOINS_PATH, name="streamjoin-joins")(joins)
