"""Benchmark harness for routing between a cheap and an extra retrieval arm.

One straight path: dataset -> units -> arms -> outcome table -> policy scores -> protocol ->
tracker. Definitions of every reported number: docs/metrics.md.
"""

__version__ = "0.1.0"
