"""Benchmarks: streamjoin's assignor side by side with faust-streaming's built-in one.

Run ``make bench`` (or ``python benchmarks/assignor.py --help``).
"""
