"""Running a faust app in this process: the faust side of ``streamjoin worker``."""

from __future__ import annotations

import faulthandler
import signal
from typing import TYPE_CHECKING, Any

import faust

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

    ``kill -QUIT`` writes every thread's stack to stderr and the worker runs
    on (even when its event loop is blocked); ``kill -USR1`` (mode's) also
    lists the asyncio tasks, if the loop still turns.
    """
    from faust.worker import Worker

    faulthandler.register(signal.SIGQUIT, all_threads=True, chain=False)

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
