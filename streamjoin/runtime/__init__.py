"""Runtime adapters: embedded broker, worker entry point, table restoration.

This package is the I/O side of streamjoin. :mod:`streamjoin.runtime.broker`
imports only the standard library; the modules that need faust or aiokafka
(``tables``, ``restore``, ``worker``) import them at module level and are
therefore only imported when a worker actually runs.
"""
