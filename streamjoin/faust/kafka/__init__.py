"""The seam to faust's and aiokafka's internals (faust-streaming 0.15.3, aiokafka 0.14.0).

These are the only modules that read, call or replace private attributes of
faust or aiokafka objects; each names the ones it owns in its docstring, and
``tests/architecture/test_layers.py`` (``SEAM``) fails when any other module
touches one. An upgrade of either library is checked here, module by module.

* :mod:`~streamjoin.faust.kafka.session`: the group session lease (aiokafka's
  ``GroupCoordinator._send_req``), each partition's latest fetch time, rejoin requests;
* :mod:`~streamjoin.faust.kafka.fetch_chain`: the one hook chain on the
  consumer's fetch (``Consumer._getmany``);
* :mod:`~streamjoin.faust.kafka.fetch_guard`: fetched records faust would drop
  are read again (a hook on the chain);
* :mod:`~streamjoin.faust.kafka.consumer`: faust's delivery, offset and ack
  bookkeeping (acks by offset range), the fetch wait, the fetcher;
* :mod:`~streamjoin.faust.kafka.producer`: the bulk producer (aiokafka record batches);
* :mod:`~streamjoin.faust.kafka.stores`: faust's RocksDB store, one database per partition;
* :mod:`~streamjoin.faust.kafka.app`: tables' changelogs, tracing tags;
* :mod:`~streamjoin.faust.kafka.settings`: app settings read as faust stores them
  (``Settings._broker``, ``_web_port``, ...), not counted as a use;
* :mod:`~streamjoin.faust.kafka.metadata`: the credentialed metadata reader and
  partition counts, each partition's replicas (``ClusterMetadata._partitions``);
* :mod:`~streamjoin.faust.kafka.checks`: the start-up checks;
* :mod:`~streamjoin.faust.kafka.range_read`: reading a topic's offset range
  with a client of its own;
* :mod:`~streamjoin.faust.kafka.cooperative`: cooperative rebalancing on the
  classic protocol (aiokafka's ``_on_join_prepare`` and ``_on_join_complete``
  replaced: nothing revoked at prepare, kept partitions keep their fetch state);
* :mod:`~streamjoin.faust.kafka.incremental`: faust's side of a cooperative
  rebalance, only what moves stops (faust's revoke and assign steps taken for
  the partitions that move: ``Consumer._active_partitions``, ``App._update_assignment``, ...);
* :mod:`~streamjoin.faust.kafka.transport`: faust's transport, consumer and
  consumer thread subclassed: the worker consumer fetches as the member's rack
  (``AIOKafkaConsumerThread._create_worker_consumer``, the consumer's
  ``_client_rack``) and rebalances cooperatively.
"""
