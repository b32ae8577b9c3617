"""Logging is configured once per process, by whichever CLI runs first, in one format.

Library modules only call ``logging.getLogger(__name__)``. A CLI calls
:func:`configure_logging`; a later call in the same process (``python -m builder run`` calling
each stage's ``main``) changes only the level, so every stage logs the same way.
"""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATEFMT = "%H:%M:%S"
_HANDLER_NAME = "xcm3"


def configure_logging(verbose: bool = False, *, quiet: bool = False) -> None:
    """INFO by default, DEBUG with ``verbose``, WARNING with ``quiet``; one stderr handler."""
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    root = logging.getLogger()
    if not any(h.get_name() == _HANDLER_NAME for h in root.handlers):
        handler = logging.StreamHandler()
        handler.set_name(_HANDLER_NAME)
        handler.setFormatter(logging.Formatter(FORMAT, DATEFMT))
        root.addHandler(handler)
    root.setLevel(level)
