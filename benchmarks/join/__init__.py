"""The join benchmark: throughput against a ceiling and two peers, latency, state size.

``__main__.py`` (``python -m benchmarks.join``) is the command line and summary of its
parts: ``throughput.py`` (its ceiling: ``bare_consumer.py``; its peers: ``peer_app.py``
and ``quix_app.py``), ``scaling.py``, ``latency.py`` and ``state.py``.
"""
