"""Background work whose failure must stop the worker: one way to supervise it.

A join batch, a table restoration and an archive flush run in background
tasks; if one of them fails, carrying on would lose or double records, so the
worker crashes (faust's ``App.crash`` / mode's ``Service.crash``: the worker
exits non-zero and its supervisor restarts it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["crash_on_failure"]

T = TypeVar("T")


async def crash_on_failure(
    work: Awaitable[T],
    *,
    what: str,
    crash: Callable[[BaseException], Awaitable[object]],
    logger: logging.Logger,
    stopping: Callable[[], bool] | None = None,
    on_shutdown: str = "",
) -> T | None:
    """Await *work*; if it raises, log it and *crash* the worker (``None`` returned).

    Cancellation goes through. When *stopping* says the worker is stopping
    already, a failure is logged as cut short by the shutdown (with
    *on_shutdown*, what happens to the work's records) and nothing crashes.
    """
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if stopping is not None and stopping():
            logger.info("%s cut short by the shutdown (%r)%s", what, exc, on_shutdown)
            return None
        logger.exception("%s failed, stopping the worker", what)
        await crash(exc)
        return None
