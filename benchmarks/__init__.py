"""Benchmarks of streamjoin against faust-streaming, by subject, over one shared harness.

Each subject is a package run from the repository root with ``python -m`` (each takes
``--help``):

* ``assignor/``: ``make bench``, ``python -m benchmarks.assignor`` (the assignor against
  faust's on seeded scenarios) and ``python -m benchmarks.assignor.churn`` (warm-ups and
  rack safety under a replayed churn);
* ``restore/``: ``make bench-restore``, ``python -m benchmarks.restore``;
* ``join/``: ``make bench-join``, ``python -m benchmarks.join``;
* ``rebalance/``: ``make bench-rebalance``, ``python -m benchmarks.rebalance``.

``harness/`` holds what they share: the run's directory, broker and worker processes,
the changelog and the backlog they produce, measurement helpers and report printing;
``metrics/`` judges an assignment from the outputs alone.  The workers a benchmark
starts run its own apps by module name (``benchmarks.restore.app:app``).
"""
