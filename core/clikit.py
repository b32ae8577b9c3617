"""The CLI kit: one exit convention and the common flags for all four command lines.

:meth:`CliKit.run` maps how a command body ended: its return code; ``error: <one line>`` and
exit 2 for the user's errors, this machine's failures (:func:`local_failure`) and a missing
library (:func:`missing_library`); exit 130 on Ctrl-C and 143 on SIGTERM (both
``KeyboardInterrupt``, so a stage's run record ends ``interrupted``); anything else is our bug,
logged CRITICAL and re-raised with its traceback. What only one CLI knows is passed as hooks.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

EXIT_INTERNAL, EXIT_USER, EXIT_INTERRUPTED, EXIT_TERMINATED = 1, 2, 130, 128 + signal.SIGTERM
OUR_PACKAGES = frozenset({"core", "benchmark", "builder", "annotation", "triplets", "pipeline",
                          "tests"})
WORKDIR_HELP = "work dir (default $XCM_WORKDIR or ./xcm-work)"
RESUME = "run the same command again to resume"

#: a missing module's top-level name -> the pyproject extra that installs it
EXTRA_OF: Mapping[str, str] = {
    "torch": "torch", "torchvision": "torch", "open_clip": "openclip", "transformers": "hf",
    "safetensors": "hf", "tokenizers": "hf", "sentencepiece": "hf", "accelerate": "hf",
    "einops": "hf", "multilingual_clip": "mclip", "peft": "qwen", "qwen_vl_utils": "qwen",
    "sklearn": "analysis", "scipy": "analysis", "umap": "analysis", "ddgs": "builder",
    "google": "builder", "tenacity": "builder", "imagehash": "builder",
    "FlagEmbedding": "builder", "label_studio_sdk": "annotation", "krippendorff": "annotation",
    "chromadb": "chromadb", "mteb": "mteb",
}


class Terminated(KeyboardInterrupt):
    """SIGTERM as a ``KeyboardInterrupt``, so what catches Ctrl-C catches it too."""


# -- the common flags ------------------------------------------------------------------------
def add_workdir(parser: Any, *, help: str = WORKDIR_HELP, default: Any = None,
                **kw: Any) -> None:
    """The one ``--workdir`` flag (a parser, a subparser or a mutually exclusive group)."""
    parser.add_argument("--workdir", default=default, help=help, **kw)


def add_version(parser: argparse.ArgumentParser) -> None:
    """``--version``: the program and the toolkit's one version (``core.__version__``)."""
    from core import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")


def add_verbose(parser: Any, **kw: Any) -> None:
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging", **kw)


# -- the error lines -------------------------------------------------------------------------
def missing_library(exc: BaseException, extra: str) -> str | None:
    """The install line when ``exc`` is a missing third-party module, else None."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.partition(".")[0]
    if top in OUR_PACKAGES:
        return None
    which = EXTRA_OF.get(top, extra)
    return (f"the Python module {exc.name!r} is missing; install the {which} extra: "
            f"pip install -e '.[{which}]'")


#: errno values that mean this machine cannot do the work (our side, not the input's).
LOCAL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                          errno.EMFILE, errno.ENFILE})
_SQLITE_LOCAL = ("database or disk is full", "attempt to write a readonly database",
                 "disk I/O error")
_FIX = ("fix the disk or the permissions and run the same command again (files written "
        "before are kept)")


def local_failure(exc: BaseException, database: str = "a database") -> str | None:
    """One line when ``exc`` is this machine's failure (disk full or read-only, no permission,
    out of file handles: never an item's fault), else None."""
    if isinstance(exc, OSError) and exc.errno in LOCAL_ERRNOS:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"cannot write{where}: {exc.strerror or exc}; {_FIX}"
    if isinstance(exc, sqlite3.OperationalError) and any(m in str(exc) for m in _SQLITE_LOCAL):
        return f"cannot write {database}: {exc}; {_FIX}"
    return None


def report(text: str, *, error: bool = False) -> None:
    """A command's own output: its report on stdout, or its one error line on stderr."""
    stream = sys.stderr if error else sys.stdout
    try:
        print(text, file=stream, flush=True)  # noqa: T201 - the one place
    except BrokenPipeError:  # the reader has gone (`| head`): the rest goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Terminated` in the main thread (only there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, previous)
        raise Terminated("SIGTERM")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- the kit ---------------------------------------------------------------------------------
def _no_errors() -> tuple[type[BaseException], ...]:
    return ()


@dataclass(frozen=True)
class CliKit:
    """One CLI's use of the exit convention.

    ``extra``: the extra named for a module :data:`EXTRA_OF` lacks. ``user_errors``: returns
    the one-line error classes (lazily, so ``--help`` stays light). ``error_lines``: hooks
    ``exc -> line | None`` tried first. ``resume``: the end of the interrupted line.
    """

    extra: str
    user_errors: Callable[[], tuple[type[BaseException], ...]] = _no_errors
    error_lines: Sequence[Callable[[BaseException], str | None]] = field(default_factory=tuple)
    resume: Callable[[], str] | None = None
    database: str = "a database"

    def line_for(self, exc: BaseException) -> str | None:
        """The one error line (exit 2) for ``exc``, or None when it is our bug."""
        line = missing_library(exc, self.extra)
        if line is None and not isinstance(exc, ModuleNotFoundError):
            for hook in self.error_lines:
                line = hook(exc)
                if line is not None:
                    break
            else:
                line = local_failure(exc, self.database)
            if line is None and isinstance(exc, self.user_errors()):
                line = str(exc)
        return None if line is None else line or type(exc).__name__

    def run(self, fn: Callable[[], int | None]) -> int:
        """Run a command body with SIGTERM raising, under the exit convention."""
        with sigterm_raises():
            try:
                return int(fn() or 0)
            except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM through sigterm_raises
                term = isinstance(exc, Terminated)
                how = self.resume() if self.resume else RESUME
                report(f"interrupted{' (SIGTERM)' if term else ''}: {how}", error=True)
                return EXIT_TERMINATED if term else EXIT_INTERRUPTED
            except Exception as exc:
                line = self.line_for(exc)
                if line is None:
                    if not getattr(exc, "_xcm_logged", False):  # once, also when nested
                        log.critical("internal error (a bug in 3XCM, not your input; please "
                                     "report it with the traceback below): %s: %s",
                                     type(exc).__name__, exc)
                        try:
                            exc._xcm_logged = True  # type: ignore[attr-defined]
                        except AttributeError:  # an exception type without a __dict__
                            pass
                    raise
                report(f"error: {line}", error=True)
                return EXIT_USER

    def main(self, parser: argparse.ArgumentParser, body: Callable[[argparse.Namespace], Any],
             argv: list[str] | None = None, *, configure: Callable[[bool], None] | None = None,
             ) -> int:
        """Parse ``argv`` (a usage error exits 2 there), configure logging, run ``body``."""
        args = parser.parse_args(argv)
        if configure is None:
            from core.logs import configure_logging as configure
        configure(bool(getattr(args, "verbose", False)))
        return self.run(lambda: body(args))
