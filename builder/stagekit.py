"""What every builder stage shares: its parser (:func:`stage_parser`), the exit convention of
``core.clikit`` (:func:`stage_main`) and the run record that ends ``done``, ``interrupted`` or
``failed`` (:func:`stage_run`)."""

from __future__ import annotations

import argparse
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from builder.catalog import Catalog, CatalogError, brief, corrupt_reason
from builder.statuses import RunStatus
from builder.workdir import WorkDir, resolve_workdir
from core import clikit
from core.clikit import report
from core.options import add_options, plain

log = logging.getLogger(__name__)

NOISY_LOGGERS = ("httpx", "httpcore", "primp", "ddgs")  # a line per request
WORKDIR_DB = "the work dir's database"


class StageInputError(ValueError):
    """What the user must fix (bad input, a credential, a service): one line, exit code 2."""


def nothing_succeeded(stage: str, tried: int, ok: int, last: str | None,
                      what: str = "requests") -> None:
    """A run that asked ``tried`` times and got no answer is not ``done``: it ends ``failed``."""
    if tried and not ok:
        raise StageInputError(f"{stage}: none of {tried} {what} succeeded (last: {last}); "
                              "what was answered before is kept: run the same command again, "
                              "or build offline (docs/offline.md)")


def built_before(workdir: str | None, first: str) -> None:
    """Refuse a work dir without a catalog before anything is made there."""
    wd = WorkDir(resolve_workdir(workdir))
    if not wd.catalog_path.exists():
        raise StageInputError(f"no catalog in {wd.root}: nothing built there yet; check "
                              f"--workdir, or start with {first} (docs/builder.md)")


def user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that are one line and exit 2 (imported lazily: ``--help`` stays light)."""
    from builder.llm.base import LLMSetupError
    from core.datatables import TableError

    return (StageInputError, LLMSetupError, TableError, CatalogError)


def damaged_database(exc: BaseException) -> str | None:
    """The kit's line for a work-dir database damaged while in use."""
    why = corrupt_reason(exc)
    return None if why is None else f"a database in the work dir is damaged ({why})"


#: the builder's use of the CLI kit (``python -m pipeline`` and every stage)
KIT = clikit.CliKit(extra="builder", user_errors=user_errors, error_lines=(damaged_database,),
                    database=WORKDIR_DB)


def concept_filter(spec: str, flag: str = "--concepts") -> set[str] | None:
    """``all`` (None: every concept) or the comma-separated names; a list naming none
    (``""``, ``","``) is bad input, never "no concept" or "every concept"."""
    if spec.strip().lower() == "all":
        return None
    from core.text import normalize_term

    names = {normalize_term(c) for c in spec.split(",") if c.strip()}  # NFC, as every name
    if not names:
        raise StageInputError(f"{flag} {spec!r} names no concept: give names such as "
                              "food,taxi, or all")
    return names


def stage_parser(prog: str, doc: str | None, config: type | None = None
                 ) -> argparse.ArgumentParser:
    """A stage's parser: the docstring's first paragraph, common flags, ``config``'s flags."""
    p = argparse.ArgumentParser(prog=f"python -m {prog}",
                                description=plain((doc or "").split("\n\n")[0]) or None)
    clikit.add_workdir(p)
    clikit.add_verbose(p)
    clikit.add_version(p)
    if config is not None:
        add_options(p, config)
    return p


def configure(verbose: bool = False) -> None:
    """Logging for a stage (once per process; later calls only change the level)."""
    from core.logs import configure_logging

    configure_logging(verbose)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def describe(exc: BaseException) -> str:
    """One line for the run record: what ended the run."""
    if isinstance(exc, clikit.Terminated):
        return "SIGTERM"
    if isinstance(exc, KeyboardInterrupt):
        return "KeyboardInterrupt"
    return brief(clikit.missing_library(exc, "builder") or f"{type(exc).__name__}: {exc}", 500)


def stage_main(parser: argparse.ArgumentParser, body: Callable[[argparse.Namespace], int | None],
               argv: list[str] | None = None) -> int:
    """Parse ``argv``, configure logging, run ``body(args)`` under :func:`cli_main`."""
    return KIT.main(parser, body, argv, configure=configure)


def cli_main(fn: Callable[[], int | None]) -> int:
    """Run a command body under the exit convention (also ``python -m pipeline``)."""
    return KIT.run(fn)


def report_run(catalog: Catalog, stage: str) -> None:
    """Print the summary of the stage's last run (what a stage's CLI ends with)."""
    run = catalog.last_run(stage)
    report((run["summary"] if run is not None else None) or f"{stage}: no run recorded")


@dataclass
class RunRecord:
    """What a stage fills in while it runs; written at the end whatever the outcome."""

    run_id: int
    counts: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    usage: dict[str, Any] = field(default_factory=dict)


@contextmanager
def stage_run(catalog: Catalog, stage: str, params: Mapping[str, Any], inputs: Any = None,
              llm: Any = None) -> Iterator[RunRecord]:
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
            rec.usage = {"llm": llm.spec, **asdict(llm.usage)}
        summary = rec.summary
        if error is not None:
            summary = f"{status}: {error}" + (f"\n{summary}" if summary else "")
        try:
            catalog.finish_run(rec.run_id, status, rec.counts, summary or None, rec.usage)
        except Exception as exc:
            if error is None:
                raise
            # e.g. the full disk that ended the run: the record keeps this process's PID, so
            # once it has exited status and the next run show the run interrupted
            log.warning("could not record the end of run %d (%s); it shows as interrupted once "
                        "this process has exited", rec.run_id, describe(exc))


def format_summary(title: str, sections: Mapping[str, Mapping[str, Any] | Counter],
                   top: int = 16) -> str:
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
