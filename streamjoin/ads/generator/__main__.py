"""``python -m streamjoin.ads.generator``: the generator's command line."""

from __future__ import annotations

import contextlib
import sys

from streamjoin.ads.generator.cli import main

with contextlib.suppress(BrokenPipeError):
    sys.exit(main())
