"""Development helpers used by tests, benchmarks and the demo: the embedded Kafka-protocol
broker (:mod:`~streamjoin.dev.broker`) and a worker process launcher
(:mod:`~streamjoin.dev.process`). Standard library only.
"""
