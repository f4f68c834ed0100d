"""Benchmark harness for routing between a cheap and an extra retrieval arm.

One straight path: dataset -> units -> arms -> outcome table -> policy scores -> protocol ->
tracker. Definitions of every reported number live in the project's SPEC (see README).
"""

__version__ = "0.1.0"
