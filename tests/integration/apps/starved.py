"""The example's ad join (``streamjoin.ads.app``) whose fetcher can be starved on
demand: while the file named by ``SJ_HOLD_FILE`` exists, the consumer sends no
fetch for ``impressions[0]`` (its high watermark and fetch time stay where they
were while the broker's log moves on). The worker logs ``fetches held`` and
``fetches released`` when it follows the file.

Environment: the ``ADS_*`` variables of the example, and ``SJ_HOLD_FILE``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from faust.types import TP

from streamjoin.ads.app import AdsSettings, create_app
from streamjoin.faust.kafka.session import hold_fetches

logger = logging.getLogger(__name__)

settings = AdsSettings.from_env()
app = create_app(settings).app
HOLD_FILE = Path(os.environ["SJ_HOLD_FILE"])
HELD = TP(settings.topics.impressions, 0)


@app.task
async def follow_hold_file() -> None:
    held = False
    while True:
        wanted = HOLD_FILE.exists()
        if wanted != held and hold_fetches(app.consumer, [HELD], wanted):
            held = wanted
            logger.warning("fetches %s: %s", "held" if held else "released", HELD)
        await asyncio.sleep(0.05)
