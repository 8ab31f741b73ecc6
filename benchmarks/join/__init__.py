"""The join benchmark: throughput against a count-only faust peer, latency, state size.

``__main__.py`` (``python -m benchmarks.join``) is the command line and summary of its
parts: ``throughput.py`` (its peer: ``peer_app.py``), ``scaling.py``, ``latency.py``
and ``state.py``.
"""
