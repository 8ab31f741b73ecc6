"""Joins in a faust worker (mirrors :mod:`streamjoin.join`).

* :mod:`~streamjoin.faust.join.types`: ``JoinConfig`` and the records in and out;
* :mod:`~streamjoin.faust.join.declare`: what ``app.join`` checks and declares;
* :mod:`~streamjoin.faust.join.operator`: ``Join``, which wires the rest into faust
  and runs batches;
* :mod:`~streamjoin.faust.join.intake`: input records taken in bulk from the
  consumer's fetches;
* :mod:`~streamjoin.faust.join.registry`: the task registry: each task's state across rebalances;
* :mod:`~streamjoin.faust.join.tasks`: one task's runtime;
  :mod:`~streamjoin.faust.join.batch_state`: its RocksDB-backed state (its records
  processed and stops: the pure :mod:`streamjoin.join.activity`);
* :mod:`~streamjoin.faust.join.router`: a task's records applied to its logic;
* :mod:`~streamjoin.faust.join.batch`: the durability steps of a batch;
  :mod:`~streamjoin.faust.join.fault_points`: crash points for tests;
* :mod:`~streamjoin.faust.join.stats`: counters, progress lines, the web page's view.
"""
