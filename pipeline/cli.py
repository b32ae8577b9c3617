"""``python -m pipeline``: ``status`` (the default), ``export TABLE --out FILE`` and ``run`` (each
stage's ``main`` in order, each resuming; stops at the first non-zero exit)."""

from __future__ import annotations

import argparse
import json
import logging
import shlex

from builder.catalog import Catalog
from builder.stagekit import StageInputError, cli_main, configure
from builder.table_export import export_table
from builder.workdir import WorkDir, resolve_workdir
from core.clikit import add_version, add_workdir, report
from core.options import plain
from pipeline.run import run_stages
from pipeline.stages import STAGES
from pipeline.status import build_status, empty_status, format_status

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline",
                                description=plain(__doc__.split("\n\n")[0]))
    add_workdir(p)
    add_version(p)
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser("status", help="stage states and counts (the default)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    e = sub.add_parser("export", help="write a catalog table as CSV or parquet")
    e.add_argument("table")
    e.add_argument("--out", required=True, help="FILE.csv or FILE.parquet")
    r = sub.add_parser("run", help="run the stages in order, resuming")
    r.add_argument("--from", dest="start", default=None, help="first stage")
    r.add_argument("--to", dest="stop", default=None, help="last stage")
    r.add_argument("--llm", default=None, help="forwarded to stages that take --llm")
    r.add_argument("--embedder", default=None, help="forwarded to stages that take --embedder")
    r.add_argument(
        "--stage-args",
        action="append",
        default=[],
        metavar="STAGE=ARGS",
        help='extra arguments for one stage, e.g. "concepts=--rounds 3"',
    )
    for q in (s, e, r):
        add_workdir(q, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return p


def _stage_args(specs: list[str]) -> dict[str, list[str]]:
    extra: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, rest = spec.partition("=")
        if not sep:
            raise StageInputError(f"--stage-args wants STAGE=ARGS, got {spec!r}")
        extra.setdefault(name, []).extend(shlex.split(rest))
    return extra


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure()

    def body() -> int:
        command = args.command or "status"
        if command == "run":
            forward = {"--llm": args.llm, "--embedder": args.embedder}
            return run_stages(args.workdir, args.start, args.stop, forward,
                              _stage_args(args.stage_args), stages=STAGES)
        wd = WorkDir(resolve_workdir(args.workdir))
        # status and export only read: the catalog is opened read-only (works on a read-only
        # disk); without one nothing is made: status says so, export has nothing to write
        if not wd.catalog_path.exists():
            if command == "export":
                raise StageInputError(f"no catalog in {wd.root}: nothing built there yet "
                                      "(check --workdir, or run a stage first)")
            st = empty_status(wd.root, STAGES)
        else:
            with Catalog(wd, readonly=True) as catalog:
                if command == "export":
                    n = export_table(catalog, args.table, args.out)
                    report(f"wrote {n} rows of {args.table} to {args.out}")
                    return 0
                st = build_status(catalog, STAGES)
        report(json.dumps(st, indent=2) if getattr(args, "json", False) else format_status(st))
        return 0

    return cli_main(body)
