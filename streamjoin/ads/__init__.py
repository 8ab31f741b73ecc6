"""The ad-monetization vertical, shipped in the wheel.

* :mod:`~streamjoin.ads.attribution` and :mod:`~streamjoin.ads.policy`: the pure
  join policy (impressions ⋈ clicks → one outcome per click) and its key families;
* :mod:`~streamjoin.ads.topics`: every topic name;
* :mod:`~streamjoin.ads.app`: the app factory (``streamjoin worker -A streamjoin.ads.app:app``);
* :mod:`~streamjoin.ads.generator`: the seeded event generator;
* :mod:`~streamjoin.ads.archive`: inputs and outcomes to hour-partitioned Parquet;
* :mod:`~streamjoin.ads.spark`: the batch side on PySpark;
* :mod:`~streamjoin.ads.demo`: ``streamjoin demo``.

Importing this package imports none of them.
"""
