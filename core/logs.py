"""Logging configured once per process, by whichever CLI runs first, in one format (a later
call changes only the level)."""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATEFMT = "%H:%M:%S"
HANDLER_NAME = "xcm3"  # the one handler configure_logging adds
# Libraries that log a line per HTTP request at INFO: shown with ``verbose`` only.
NOISY_LOGGERS = ("httpx", "httpcore")


class _StderrHandler(logging.StreamHandler):
    """A handler writing to ``sys.stderr`` as it is at each record (test runners swap it)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:  # StreamHandler.__init__ sets it; ignored
        pass


def configure_logging(verbose: bool = False, *, quiet: bool = False) -> None:
    """One stderr handler: INFO, DEBUG with ``verbose``, WARNING and no bars with ``quiet``."""
    if quiet:
        no_progress_bars()
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    root = logging.getLogger()
    if not any(h.get_name() == HANDLER_NAME for h in root.handlers):
        handler = _StderrHandler()
        handler.set_name(HANDLER_NAME)
        handler.setFormatter(logging.Formatter(FORMAT, DATEFMT))
        root.addHandler(handler)
    root.setLevel(level)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.WARNING)



def no_progress_bars() -> None:
    """Every tqdm bar of this process (ours, the hub's, datasets') disabled from now on, and
    those of its child processes: tqdm reads ``$TQDM_DISABLE`` only when it is imported."""
    import os

    from tqdm import std

    os.environ["TQDM_DISABLE"] = "1"
    if getattr(std.tqdm.__init__, "_xcm_quiet", False):
        return
    init = std.tqdm.__init__

    def quiet_init(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 - tqdm's own
        init(self, *args, **{**kwargs, "disable": True})

    quiet_init._xcm_quiet = True  # type: ignore[attr-defined]
    std.tqdm.__init__ = quiet_init  # type: ignore[method-assign]
