"""Table restoration's pure rules (:mod:`~streamjoin.restore.plan`) and its progress
reporting (:mod:`~streamjoin.restore.progress`). No faust, no aiokafka, no I/O but logging.
"""
