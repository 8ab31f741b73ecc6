"""Benchmarks of streamjoin against faust-streaming, over one shared harness.

* ``make bench``: ``assignor.py`` (report: ``assignor_report.py``; inputs:
  ``scenarios.py``; judged by ``metrics/``; the peer: ``faust_peer.py``);
* ``make bench-restore``: ``restore.py`` (its app: ``restore_app.py``);
* ``make bench-join``: ``join.py``, the command line of ``join_throughput.py`` (its
  peer: ``join_peer_app.py``), ``join_latency.py`` and ``join_state.py``.

``harness/`` holds what they share: broker and worker processes, the backlog,
measurement helpers and report printing.  Each entry takes ``--help``.
"""
