"""The restore benchmark: streamjoin's table restoration against faust's recovery.

``__main__.py`` (``python -m benchmarks.restore``) writes one changelog and times a
worker of ``app.py`` restoring it with each table manager.
"""
