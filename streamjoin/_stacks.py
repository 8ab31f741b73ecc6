"""Where a stuck process is: every thread's stack and every event loop's tasks, on a signal.

faust runs the consumer in a thread with its own event loop; mode's own dump
(``SIGUSR1``) lists only the main loop's tasks, and only while that loop
turns. :func:`install_stack_dump` makes one signal write, to stderr, first
every thread's stack (``faulthandler``: at once, whatever the threads do),
then the tasks of every open event loop with their stacks (as soon as the
main thread runs Python again: a blocked event loop or a thread join does).
The process runs on.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import signal
import sys
import traceback
from types import FrameType

__all__ = ["install_stack_dump"]


def _await_chain(task: asyncio.Task[object]) -> list[FrameType]:
    """The frames *task* waits in, outermost first (asyncio's own stack of a
    suspended task stops at its first coroutine)."""
    frames: list[FrameType] = []
    awaited: object = task.get_coro()
    while awaited is not None and len(frames) < 50:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return frames


def _dump_tasks(signum: int, _frame: FrameType | None) -> None:
    out = sys.stderr
    loops = [
        obj
        for obj in gc.get_objects()
        if isinstance(obj, asyncio.AbstractEventLoop) and not obj.is_closed()
    ]
    print(f"--- asyncio tasks of {len(loops)} open event loop(s) (signal {signum})", file=out)
    for loop in loops:
        tasks: list[asyncio.Task[object]] = []
        for _ in range(3):  # another thread may change the task set meanwhile
            try:
                tasks = sorted(asyncio.all_tasks(loop), key=lambda task: task.get_name())
                break
            except RuntimeError:
                continue
        print(f"loop {id(loop):#x} (running: {loop.is_running()}): {len(tasks)} task(s)", file=out)
        for task in tasks:
            print(f"task {task!r}", file=out)
            frames = [(frame, frame.f_lineno) for frame in _await_chain(task)]
            print("".join(traceback.StackSummary.extract(frames).format()), end="", file=out)
    out.flush()


def install_stack_dump(signum: int = signal.SIGQUIT) -> None:
    """Make *signum* dump every thread's stack and every event loop's tasks to stderr."""
    signal.signal(signum, _dump_tasks)
    faulthandler.register(signum, all_threads=True, chain=True)
