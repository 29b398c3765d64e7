"""Validation matrix of real profiler traces (see README.md)."""
