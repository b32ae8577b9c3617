"""Metrics: pure functions on arrays, one module per metric group."""
