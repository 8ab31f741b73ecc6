"""The assignor benchmark: streamjoin's assignor against faust-streaming's, and churn.

* ``__main__.py``: ``python -m benchmarks.assignor``, both assignors on the same
  seeded scenarios, each measurement in its own process;
* ``scenarios.py``: the group-state documents; ``faust_peer.py``: faust's
  ``PartitionAssignor`` driven as its leader runs it; ``report.py``: the side-by-side
  tables (figures judged by ``benchmarks/metrics``);
* ``churn.py``: ``python -m benchmarks.assignor.churn``, a replayed sequence of group
  changes judged for cold activations, rack safety and cross-rack tasks.
"""
