"""Runtime adapters: embedded broker, worker entry point, table restoration.

This package is the I/O side of streamjoin:

* :mod:`~streamjoin.runtime.broker`: the embedded Tansu broker (standard library only);
* :mod:`~streamjoin.runtime.worker` and :mod:`~streamjoin.runtime.process`: run a
  worker in this process or as a child process;
* :mod:`~streamjoin.runtime.tables` (``streamjoin:TableManager``),
  :mod:`~streamjoin.runtime.restorer`, :mod:`~streamjoin.runtime.changelog_store`,
  :mod:`~streamjoin.runtime.progress`: table restoration;
* :mod:`~streamjoin.runtime.restore_plan`: its pure rules (no faust, no I/O);
* :mod:`~streamjoin.runtime.errors`: the errors raised here.

Modules that need faust or aiokafka import them at module level and are only
imported when a worker runs; importing this package imports nothing heavy.
"""
