"""The worker entry point: options (one definition: flags, variables, defaults), Kafka
security settings, ``module:attribute`` loading and :func:`~streamjoin.worker.run.run_worker`.

Importing this package imports no faust.
"""
