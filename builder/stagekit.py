"""The stage kit: what every builder stage shares, in one place.

- Flags: :func:`stage_parser` gives every stage ``--workdir`` and ``-v``.
- The main body: :func:`stage_main` parses the flags, configures logging once per process
  (``benchmark.logs``, so in ``python -m builder run`` every stage logs the same way), turns
  SIGTERM into :class:`StageTerminated` for the duration of the stage, and applies the exit
  convention: 0 done; 2 with one line on stderr for what the user must fix
  (:func:`user_errors`: bad input, a missing credential, an unreachable service, an unusable
  catalog; also what the stage cannot do on this machine: a full or read-only disk) and for a
  missing optional library ("install the builder extra ..."); 130 after Ctrl-C and 143 after
  SIGTERM (one line: run the same command again to resume). Any other exception is our bug:
  it propagates with its traceback. ``python -m builder`` runs under the same :func:`cli_main`,
  so in ``builder run`` SIGTERM also reaches the ``review`` and ``triplets`` entry points.
- The run record: a stage's library function wraps its work in :func:`stage_run`; the record
  ends ``done``, ``interrupted`` (Ctrl-C, SIGTERM) or ``failed`` (any other exception: the
  first line of the summary says ``failed: <error>``). A run killed with SIGKILL stays
  ``running``; the next run resumes from the catalog.
- Output: :func:`report` is the one place a stage writes its own report (stdout) or its one
  error line (stderr); everything else logs.
"""

from __future__ import annotations

import argparse
import errno
import logging
import signal
import sqlite3
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from builder.catalog import Catalog, CatalogError, corrupt_reason
from builder.statuses import RunStatus

log = logging.getLogger(__name__)

BUILDER_EXTRA = "pip install -e '.[builder]'"
OUR_PACKAGES = frozenset({"builder", "benchmark", "annotation", "triplets", "tests"})
NOISY_LOGGERS = ("httpx", "httpcore", "primp")  # a line per HTTP request
EXIT_USER, EXIT_INTERRUPTED, EXIT_TERMINATED = 2, 130, 128 + signal.SIGTERM


class StageInputError(ValueError):
    """What the user must fix (bad input, a missing credential, an unreachable service):
    one line on stderr, exit code 2."""


class StageTerminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that the run record is written (``interrupted``)."""


def user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that are one line and exit 2 (imported lazily: ``--help`` stays light)."""
    from benchmark.tables import TableError
    from builder.llm import LLMSetupError

    return (StageInputError, LLMSetupError, TableError, CatalogError)


def concept_filter(spec: str, flag: str = "--concepts") -> set[str] | None:
    """``all`` (None: every concept) or the comma-separated names; a list naming none
    (``""``, ``","``) is bad input, never "no concept" or "every concept"."""
    if spec.strip().lower() == "all":
        return None
    from benchmark.text import normalize_term

    names = {normalize_term(c) for c in spec.split(",") if c.strip()}  # NFC, as every name
    if not names:
        raise StageInputError(f"{flag} {spec!r} names no concept: give names such as "
                              "food,taxi, or all")
    return names


def report(text: str, *, error: bool = False) -> None:
    """The command's own output: its report on stdout, or its one error line on stderr."""
    print(text, file=sys.stderr if error else sys.stdout, flush=True)  # noqa: T201 - the one place


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workdir", default=None, help="work dir (default $XCM_WORKDIR or ./xcm-work)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def stage_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """A stage's parser: ``python -m <prog>``, the docstring's first paragraph, common flags."""
    p = argparse.ArgumentParser(
        prog=f"python -m {prog}", description=(doc or "").split("\n\n")[0] or None
    )
    add_common_args(p)
    return p


def configure(verbose: bool = False) -> None:
    """Logging for a stage (once per process; later calls only change the level)."""
    from benchmark.logs import configure_logging

    configure_logging(verbose)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


# -- errors ----------------------------------------------------------------------------------
def missing_library(exc: BaseException) -> str | None:
    """The install line when ``exc`` is a missing third-party module, else None."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    if exc.name.partition(".")[0] in OUR_PACKAGES:
        return None  # one of our own modules: a bug, not a missing extra
    return f"the Python module {exc.name!r} is missing; install the builder extra: {BUILDER_EXTRA}"


#: errno values that mean this machine cannot do the work (our side, not the input's).
LOCAL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                          errno.EMFILE, errno.ENFILE})
_SQLITE_LOCAL = ("database or disk is full", "attempt to write a readonly database",
                 "disk I/O error")


def local_failure(exc: BaseException) -> str | None:
    """One line when ``exc`` is a failure of this machine (a full or read-only disk, no write
    permission, out of file handles: what stops a stage, never an item's fault), else None."""
    if isinstance(exc, OSError) and exc.errno in LOCAL_ERRNOS:
        where = f" ({exc.filename})" if exc.filename else ""
        return (f"cannot write{where}: {exc.strerror or exc}; fix the disk or the permissions "
                "and run the same command again")
    if isinstance(exc, sqlite3.OperationalError) and any(m in str(exc) for m in _SQLITE_LOCAL):
        return (f"cannot write the work dir's database: {exc}; fix the disk or the "
                "permissions and run the same command again")
    return None


def describe(exc: BaseException) -> str:
    """One line for the run record: what ended the run."""
    if isinstance(exc, StageTerminated):
        return "SIGTERM"
    if isinstance(exc, KeyboardInterrupt):
        return "KeyboardInterrupt"
    text = missing_library(exc) or f"{type(exc).__name__}: {exc}"
    text = " ".join(text.split())
    return text if len(text) <= 500 else text[:497] + "..."


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`StageTerminated` in the main thread (a second
    SIGTERM gets the previous handler); outside the main thread this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, previous)
        raise StageTerminated("SIGTERM")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- the main body ---------------------------------------------------------------------------
def stage_main(
    parser: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace], int | None],
    argv: list[str] | None = None,
) -> int:
    """Parse ``argv``, configure logging, run ``body(args)`` under :func:`cli_main`."""
    args = parser.parse_args(argv)
    configure(getattr(args, "verbose", False))
    return cli_main(lambda: body(args))


def cli_main(fn: Callable[[], int | None]) -> int:
    """Run a command body with SIGTERM raising, under the exit convention (module doc); also
    what ``python -m builder`` (and so ``builder run``) runs under."""
    with sigterm_raises():
        try:
            return int(fn() or 0)
        except StageTerminated:
            report("interrupted (SIGTERM): run the same command again to resume", error=True)
            return EXIT_TERMINATED
        except KeyboardInterrupt:
            report("interrupted: run the same command again to resume", error=True)
            return EXIT_INTERRUPTED
        except ModuleNotFoundError as exc:
            line = missing_library(exc)
            if line is None:
                raise
            report(f"error: {line}", error=True)
            return EXIT_USER
        except Exception as exc:
            why = corrupt_reason(exc)
            if why is not None:  # a work-dir database damaged while in use
                report(f"error: a database in the work dir is damaged ({why})", error=True)
                return EXIT_USER
            line = local_failure(exc)
            if line is not None:  # this machine's failure: one line, the run is resumable
                report(f"error: {line}", error=True)
                return EXIT_USER
            if not isinstance(exc, user_errors()):
                raise
            report(f"error: {exc}", error=True)
            return EXIT_USER


def report_run(catalog: Catalog, stage: str) -> None:
    """Print the summary of the stage's last run (what a stage's CLI ends with)."""
    run = catalog.last_run(stage)
    report((run["summary"] if run is not None else None) or f"{stage}: no run recorded")


# -- the run record --------------------------------------------------------------------------
@dataclass
class RunRecord:
    """What a stage fills in while it runs; written by :func:`stage_run` at the end, whatever
    the outcome (so counts assigned early are in the record of an interrupted run too)."""

    run_id: int
    counts: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    usage: dict[str, Any] = field(default_factory=dict)


@contextmanager
def stage_run(
    catalog: Catalog,
    stage: str,
    params: Mapping[str, Any],
    inputs: Any = None,
    llm: Any = None,
) -> Iterator[RunRecord]:
    """Start a stage-run record; finish it ``done`` / ``failed`` / ``interrupted``."""
    if llm is not None:
        llm.reset_usage()
    rec = RunRecord(catalog.start_run(stage, dict(params), inputs))
    status, error = RunStatus.DONE, None
    try:
        yield rec
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM through sigterm_raises
        status, error = RunStatus.INTERRUPTED, describe(exc)
        raise
    except BaseException as exc:
        status, error = RunStatus.FAILED, describe(exc)
        raise
    finally:
        if llm is not None:
            rec.usage = {"llm": llm.spec, **llm.usage.as_dict()}
        summary = rec.summary
        if error is not None:
            summary = f"{status}: {error}" + (f"\n{summary}" if summary else "")
        try:
            catalog.finish_run(rec.run_id, status, rec.counts, summary or None, rec.usage)
        except Exception:
            if error is None:
                raise
            log.exception("could not record the end of run %d", rec.run_id)


def format_summary(
    title: str, sections: Mapping[str, Mapping[str, Any] | Counter], top: int = 16
) -> str:
    """A one-screen summary: a title, then per section up to ``top`` ``key: count`` lines."""
    lines = [title]
    for name, counts in sections.items():
        items = sorted(counts.items(), key=lambda kv: (-_num(kv[1]), str(kv[0])))
        shown = ", ".join(f"{k}={v}" for k, v in items[:top])
        more = f" (+{len(items) - top} more)" if len(items) > top else ""
        lines.append(f"  {name}: {shown or '-'}{more}")
    return "\n".join(lines)


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0
