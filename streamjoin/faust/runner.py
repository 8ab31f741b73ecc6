"""Running a faust app in this process: the faust side of ``streamjoin worker``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import faust

from streamjoin._stacks import install_stack_dump

if TYPE_CHECKING:
    from faust.types import AppT

__all__ = ["APP_TYPES", "run_app"]

#: what ``-A`` must name: a faust app (``streamjoin.App`` is one)
APP_TYPES: tuple[type, ...] = (faust.App,)


def run_app(
    app: AppT,
    *,
    loglevel: str,
    logfile: str | None,
    debug: bool,
    blocking_timeout: float | None,
) -> int:
    """Run *app* in a faust ``Worker`` until it stops; return the exit status.

    ``kill -QUIT`` writes every thread's stack and every event loop's tasks
    (the consumer thread's too) to stderr, and the worker runs on
    (:mod:`streamjoin._stacks`); ``kill -USR1`` (mode's) lists the main
    loop's tasks, if it still turns.
    """
    from faust.worker import Worker

    install_stack_dump()

    # Any: Worker options of several types
    kwargs: dict[str, Any] = {"loglevel": loglevel, "logfile": logfile, "debug": debug}
    if blocking_timeout is not None:
        kwargs["blocking_timeout"] = blocking_timeout
    worker = Worker(app, **kwargs)
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
