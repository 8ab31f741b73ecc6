"""``streamjoin.ads.app`` under cProfile: where a worker's main thread spends its time.

The worker is the benchmarks' ad-monetization worker (configured by the same
``ADS_*`` variables); the profiler runs on its main thread (the event loop:
faust's streams, the join, the producer's callbacks) from import on, and the
statistics so far are written to ``SJ_BENCH_PROFILE`` every second, so a
worker stopped at the end of the run leaves a complete enough file behind.
aiokafka's consumer thread is not profiled (it is faust's, the same for the
peer). Used by ``benchmarks/join.py --profile``.
"""

from __future__ import annotations

import cProfile
import os
from typing import Any

from streamjoin.ads.app import app as _ads_app

#: where the statistics go
PROFILE_PATH = os.environ.get("SJ_BENCH_PROFILE", "join.prof")

app: Any = _ads_app
profiler = cProfile.Profile()
profiler.enable()


@app.timer(1.0)
async def dump_profile() -> None:
    """Write the statistics gathered so far (the profiler keeps running)."""
    profiler.disable()
    try:
        profiler.dump_stats(PROFILE_PATH)
    finally:
        profiler.enable()
