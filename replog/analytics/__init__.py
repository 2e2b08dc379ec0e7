"""Offline analysis of the brokers' and the controller's metrics dumps (docs/metrics-dumps.md) with PySpark.

This package imports PySpark only where it computes, so `replog` itself runs without the analytics extra.
"""


class AnalysisError(Exception):
    """The input cannot be analysed (no dump files, no valid line); the message tells the user why."""
