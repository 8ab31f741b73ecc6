"""The options of ``streamjoin demo``: :class:`DemoOptions` and their validation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from streamjoin.errors import ConfigurationError

__all__ = ["DemoOptions"]


@dataclass(frozen=True)
class DemoOptions:
    """What the demo runs.

    Attributes:
        out: output directory (created; must be empty or not exist unless ``force``).
        seed: seeds the generator: the same seed produces the same events.
        duration: seconds of generation (wall clock); the whole run takes about
            this plus worker start-up, settling and Spark (~1 minute more).
        speed: event-time milliseconds per wall-clock millisecond (60: an hour
            of events in a minute).
        rate: impressions per second of event time.
        partitions: partitions of the two input topics (= tasks).
        spark_master: Spark master URL for the batch job.
        force: replace the contents of an existing ``out``.
        grace_ms: the join's grace in event time. It must cover each input's
            own disorder (the generator's jitter, 2 s); how far the consumer
            fetches one input ahead of the other does not matter (decisions
            wait for the slower input's watermark).
    """

    out: Path
    seed: int = 7
    duration: float = 60.0
    speed: float = 60.0
    rate: float = 12.0
    partitions: int = 6
    spark_master: str = "local[*]"
    force: bool = False
    grace_ms: int = 10_000

    def __post_init__(self) -> None:
        if self.duration < 20:
            raise ConfigurationError(
                "--duration must be at least 20 s (a worker joins and one is killed), "
                f"got {self.duration}"
            )
        if self.speed <= 0 or self.rate <= 0 or self.partitions < 2:
            raise ConfigurationError("--speed and --rate must be positive and --partitions >= 2")
