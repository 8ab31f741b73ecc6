"""The rebalance benchmark: how long each task stops when the group changes.

``__main__.py`` (``python -m benchmarks.rebalance``) runs workers of ``app.py`` through
a scale-out, a scale-in and a ``kill -9``; ``traffic.py`` fills the state, feeds the
input and reads each task's progress from the changelog.
"""
