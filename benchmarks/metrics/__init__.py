"""Quality figures of an assignment, computed from the outputs alone.

The same code judges streamjoin's and faust's results: it knows nothing of either
assignor, only the group-state document (what the tasks are, who may own them) and the
output format ``{"assignment": {member: {"actives": {...}, "standbys": {...}}}}``.

* :mod:`.tasks`: a document's co-partitioned groups and tasks, an output's task owners;
* :mod:`.quality`: :func:`~.quality.evaluate`, every figure of one output (spread,
  violations, and versus a previous output: moves, warm and cold);
* :mod:`.racks`: tasks whose active member's rack holds no replica of one of their
  partitions (documents with ``partition_racks``);
* :mod:`.moves`: the fewest moves of any balanced assignment, and how many orphaned
  tasks can go warm at that minimum;
* :mod:`.flow`: the max-flow and min-cost-flow solvers those two bounds use.
"""
