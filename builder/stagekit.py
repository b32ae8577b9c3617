"""Shared plumbing of builder stages: work-dir argument, the stage-run record, the summary, and
the CLI error convention (bad input or missing credential: one line on stderr, exit code 2).

A stage's library function opens a :func:`stage_run` around its work; the record gets status
``done`` (or ``failed`` / ``interrupted`` when an exception or Ctrl-C ends it), the counts, the
one-screen summary, and the LLM usage. A run killed with SIGKILL stays ``running``; the next
run resumes from the catalog.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from builder.catalog import Catalog

log = logging.getLogger(__name__)


class StageInputError(ValueError):
    """Bad user input to a stage (unknown table, bad file, bad threshold): exit code 2."""


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workdir", default=None, help="work dir (default $XCM_WORKDIR or ./xcm-work)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@dataclass
class RunRecord:
    """What a stage fills in while it runs; written by :func:`stage_run` at the end."""

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
    status = "failed"
    try:
        yield rec
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if llm is not None:
            rec.usage = {"llm": llm.spec, **llm.usage.as_dict()}
        catalog.finish_run(rec.run_id, status, rec.counts, rec.summary or None, rec.usage)


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


def cli_main(fn: Callable[[], int]) -> int:
    """Run a CLI body; user errors become one line on stderr and exit code 2."""
    from benchmark.tables import TableError
    from builder.llm import LLMSetupError

    try:
        return fn()
    except (LLMSetupError, StageInputError, TableError) as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201 - the CLI's one line
        return 2
