"""Fixtures of the evaluator's tests."""

from __future__ import annotations

import pytest

from benchmark.logs import reset_logging


@pytest.fixture(autouse=True)
def _fresh_logging():
    """A CLI called in one test configures logging for the process; undo it afterwards, so a
    later test's library logs do not land on that test's stderr."""
    yield
    reset_logging()
