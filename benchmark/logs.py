"""Logging is configured once per process, by whichever CLI runs first, in one format.

Library modules only call ``logging.getLogger(__name__)``. A CLI calls
:func:`configure_logging`; a later call in the same process (``python -m builder run`` calling
each stage's ``main``) changes only the level, so every stage logs the same way. The handler
writes to whatever ``sys.stderr`` is when a record is emitted (a redirection, or a test's
capture made after the first CLI call), never to a stream that was closed since.
"""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATEFMT = "%H:%M:%S"
_HANDLER_NAME = "xcm3"


class _StderrHandler(logging.StreamHandler):
    """A StreamHandler bound to the current ``sys.stderr``, looked up at each record."""

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass  # always sys.stderr


def configure_logging(verbose: bool = False, *, quiet: bool = False) -> None:
    """INFO by default, DEBUG with ``verbose``, WARNING with ``quiet``; one stderr handler."""
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    root = logging.getLogger()
    if not any(h.get_name() == _HANDLER_NAME for h in root.handlers):
        handler = _StderrHandler()
        handler.set_name(_HANDLER_NAME)
        handler.setFormatter(logging.Formatter(FORMAT, DATEFMT))
        root.addHandler(handler)
    root.setLevel(level)


def reset_logging() -> None:
    """Undo :func:`configure_logging` (tests: each starts as a fresh process would)."""
    root = logging.getLogger()
    for h in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(h)
    root.setLevel(logging.WARNING)
