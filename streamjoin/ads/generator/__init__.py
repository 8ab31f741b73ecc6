"""Seeded event generator for the ad-monetization example.

* :mod:`~streamjoin.ads.generator.config`, :mod:`~streamjoin.ads.generator.core`:
  the **pure core**: :class:`GeneratorConfig` and :func:`generate`. No I/O,
  no clock, no global random state, no Kafka client; the same config yields
  the same events, in the same production order, on every machine. The event
  contract is in :mod:`~streamjoin.ads.generator.core`'s docstring.
* :mod:`~streamjoin.ads.generator.records`: record files (``--record``), one
  JSON line per produced record, and reading them back.
* :mod:`~streamjoin.ads.generator.producer`: the I/O shell: creates/checks the
  topics, produces the events with aiokafka, paces them.
* :mod:`~streamjoin.ads.generator.cli`: ``python -m streamjoin.ads.generator``.

The pure core and the record files are imported here; the producer and CLI
names (:func:`main`, ...) are resolved on first access, so importing this
package never imports aiokafka. See ``examples/ad_monetization/README.md``.
"""

from __future__ import annotations

from streamjoin._lazy import lazy_attributes
from streamjoin.ads.generator.config import (
    CLICKS,
    DEFAULT_START_TS_MS,
    IMPRESSIONS,
    MAX_VALID_TS_MS,
    MIN_VALID_TS_MS,
    GeneratorConfig,
    GeneratorConfigError,
)
from streamjoin.ads.generator.core import (
    ATTRIBUTION_WINDOW_MS,
    LABELS,
    Event,
    generate,
    partition_for_key,
)
from streamjoin.ads.generator.records import (
    RecordWriter,
    clicks_from_record,
    impressions_from_record,
    read_record,
    record_row,
    row_value,
)

# name -> "module:attribute", imported on first access (these import aiokafka)
_LAZY: dict[str, str] = {
    "CliError": "streamjoin.ads.generator.producer",
    "config_from_args": "streamjoin.ads.generator.cli",
    "main": "streamjoin.ads.generator.cli",
    "_parser": "streamjoin.ads.generator.cli",
}

__all__ = [
    "ATTRIBUTION_WINDOW_MS",
    "CLICKS",
    "DEFAULT_START_TS_MS",
    "IMPRESSIONS",
    "LABELS",
    "MAX_VALID_TS_MS",
    "MIN_VALID_TS_MS",
    "Event",
    "GeneratorConfig",
    "GeneratorConfigError",
    "RecordWriter",
    "clicks_from_record",
    "generate",
    "impressions_from_record",
    "main",
    "partition_for_key",
    "read_record",
    "record_row",
    "row_value",
]

__getattr__ = lazy_attributes(__name__, _LAZY)
