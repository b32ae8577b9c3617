"""Errors every package shares."""

from __future__ import annotations


class DataError(ValueError):
    """Bad user data: the message is one clear line; the CLI exits with code 2."""
