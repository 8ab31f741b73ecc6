"""The faust adapters: the only package that imports faust, aiokafka and rocksdict.

* :mod:`~streamjoin.faust.app`: ``streamjoin.App`` (``app.join``; our assignor, table manager);
* :mod:`~streamjoin.faust.assignment.assignor`: ``streamjoin:PartitionAssignor`` over the pure core
  (with ``member_file``: identity and claims in the data directory, and
  ``assign_hooks``: faust's sensor and tracing calls around an assignment);
* :mod:`~streamjoin.faust.join.operator` (with ``join_declare``, ``join_intake``,
  ``join_tasks``, ``join_lifecycle``, ``join_batch``, ``join_stats``) and
  :mod:`~streamjoin.faust.join.batch_state`: joins in a worker;
* :mod:`~streamjoin.faust.restore.tables`, :mod:`~streamjoin.faust.restore.restorer` (with
  ``restore_fetch``, ``restore_book``), :mod:`~streamjoin.faust.restore.changelog_store`:
  ``streamjoin:TableManager`` and restoration;
* :mod:`~streamjoin.faust.kafka.metadata`, :mod:`~streamjoin.faust.kafka.checks`: the credentialed
  Kafka metadata reader and the start-up checks;
* :mod:`~streamjoin.faust.security`: Kafka security settings as faust credentials;
* :mod:`~streamjoin.faust.runner`: running an app in a faust ``Worker``;
* :mod:`~streamjoin.faust.web`: the worker's web pages.

Importing this package imports none of them (nor faust).
"""
