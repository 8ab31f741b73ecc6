"""The assignor in faust (mirrors :mod:`streamjoin.assignment`).

* :mod:`~streamjoin.faust.assignment.assignor`: ``streamjoin:PartitionAssignor``
  over the pure core;
* :mod:`~streamjoin.faust.assignment.leader`: the group leader's step (group
  state in, member assignments out);
* :mod:`~streamjoin.faust.assignment.hooks`: faust's sensor and tracing calls
  around an assignment;
* :mod:`~streamjoin.faust.assignment.member_file`: the member's identity and
  claims in its data directory.
"""
