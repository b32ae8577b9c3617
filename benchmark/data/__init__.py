"""Dataset readers for the evaluator's tasks (3XCM release / authors' CSV; XM3600)."""

from __future__ import annotations


class DataError(ValueError):
    """Bad user data: the message is one clear line; the CLI exits with code 2."""
