"""Evaluator tasks, one file per task; names are registered in ``benchmark.zoo``."""
