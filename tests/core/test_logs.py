"""core.logs: one handler per process, writing to the stderr of the moment."""

from __future__ import annotations

import io
import logging
import sys

from core.logs import configure_logging


def test_one_handler_and_the_current_stderr(monkeypatch):
    configure_logging()
    configure_logging(verbose=True)
    root = logging.getLogger()
    assert [h.get_name() for h in root.handlers].count("xcm3") == 1
    assert root.level == logging.DEBUG
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    logging.getLogger("tests.logs").warning("one")
    monkeypatch.setattr(sys, "stderr", second)
    first.close()  # what a test runner does with a finished test's stream
    logging.getLogger("tests.logs").warning("two")
    assert second.getvalue().endswith("WARNING tests.logs: two\n")
    configure_logging()
    assert root.level == logging.INFO


def test_request_loggers_only_when_verbose():
    configure_logging()
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    configure_logging(verbose=True)
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.DEBUG
    configure_logging()
