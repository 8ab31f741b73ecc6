"""What the demo records while it runs, and how it talks to the console.

:class:`DemoState` is the run's record (the clock since start, the ownership
samples and timeline events the report draws, the latest per-worker figures);
:class:`Worker` is one started worker process and what the demo knows about
it; :func:`say` prints one line of progress.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from streamjoin.ads.demo.timeline import Sample
from streamjoin.dev.process import WorkerProcess

#: the event the run records when the generator is done (its input ends)
GENERATOR_DONE = "generator done"

__all__ = ["GENERATOR_DONE", "DemoState", "Worker", "say"]


@dataclass
class Worker:
    """A worker of the demo: its process, web port (polled) and start/kill times."""

    name: str
    process: WorkerProcess
    web_port: int
    killed_at: float | None = None
    started_at: float = 0.0


@dataclass
class DemoState:
    """The run's record: samples and events for the report, latest worker figures."""

    started: float = field(default_factory=time.monotonic)
    #: ``time.time()`` at the start, to put the workers' wall-clock times on
    #: the run's axis (:func:`~streamjoin.ads.demo.timeline.demo_time`)
    wall_started: float = field(default_factory=time.time)
    samples: list[Sample] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)

    def now(self) -> float:
        """Seconds since the demo started, to a tenth."""
        return round(time.monotonic() - self.started, 1)


def say(line: str, stream: TextIO = sys.stdout) -> None:
    """Print one line of progress right away."""
    print(line, file=stream, flush=True)
