"""``python -m builder``: the state of a build, exports, and the stage runner.

- ``python -m builder [status] [--json]``: each stage of ``builder.stages.STAGES`` with its
  state (``not run``, ``running``, ``done``, ``failed``, ``interrupted``), the last run's
  start/end and counts, and the row count of every catalog table.
- ``python -m builder export TABLE --out FILE``: any catalog table as ``.csv`` or ``.parquet``.
- ``python -m builder run [--from STAGE] [--to STAGE] [--llm SPEC] [--embedder SPEC]
  [--stage-args STAGE=ARGS ...]``: calls each stage's ``main`` in order (each resumes from the
  catalog); ``--llm`` / ``--embedder`` go to every stage that accepts them; stops at the first
  stage that returns non-zero.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import shlex
import sys
from pathlib import Path
from typing import Any

from benchmark.clikit import add_workdir
from builder.catalog import Catalog, stale_reason
from builder.stagekit import StageInputError, cli_main, configure, report
from builder.stages import STAGES, command
from builder.workdir import WorkDir, resolve_workdir

log = logging.getLogger(__name__)


def build_status(catalog: Catalog) -> dict[str, Any]:
    """Stages with state and last-run record, and the catalog's table sizes."""
    stages = []
    stale = set(catalog.stale_runs())  # shown interrupted; the next run records it so
    for name, module in STAGES:
        run = catalog.last_run(name)
        entry: dict[str, Any] = {"stage": name, "module": module}
        if run is None:
            entry["state"] = "not run"
        else:
            entry.update(
                state=run["status"],
                run_id=run["run_id"],
                started_at=run["started_at"],
                ended_at=run["ended_at"],
                counts=json.loads(run["counts_json"] or "{}"),
                usage=json.loads(run["usage_json"] or "{}"),
                runs=catalog.query("SELECT COUNT(*) FROM stage_runs WHERE stage=?", (name,))[0][0],
                headline=(run["summary"] or "").split("\n", 1)[0],
            )
            if run["run_id"] in stale:
                entry.update(state="interrupted", headline=stale_reason(run["pid"], run["host"]))
        stages.append(entry)
    tables = {t: catalog.query(f'SELECT COUNT(*) FROM "{t}"')[0][0] for t in catalog.tables()}
    return {
        "workdir": str(catalog.workdir.root),
        "schema_version": catalog.schema_version,
        "stages": stages,
        "tables": tables,
    }


def _brief(counts: dict[str, Any], width: int = 70) -> str:
    text = ", ".join(
        f"{k}={v if not isinstance(v, dict) else sum(_ints(v))}" for k, v in counts.items()
    )
    return text if len(text) <= width else text[: width - 3] + "..."


def _ints(d: dict) -> list[int]:
    return [v for v in d.values() if isinstance(v, int)]


def format_status(st: dict[str, Any]) -> str:
    lines = [
        f"work dir {st['workdir']} (catalog schema v{st['schema_version']})",
        "",
        f"{'stage':<14} {'state':<14} {'last run (UTC)':<26} last summary",
    ]
    for s in st["stages"]:
        when = s.get("ended_at") or s.get("started_at") or "-"
        what = s.get("headline") or _brief(s.get("counts", {}))
        lines.append(f"{s['stage']:<14} {s['state']:<14} {when:<26} {what}")
    lines += ["", "tables: " + ", ".join(f"{k}={v}" for k, v in st["tables"].items())]
    return "\n".join(lines)


def export_table(catalog: Catalog, table: str, out: str | Path) -> int:
    """Write one catalog table or view to CSV or parquet (by extension); returns the row count.

    Where a view ``<table>_export`` exists (e.g. ``downloads_export``: one row per search
    result with its provenance and download outcome), ``export <table>`` writes the view, the
    user-facing form of that table; name the bare table with ``<table>:raw``.
    """
    import pandas as pd

    from benchmark.files import atomic_path

    names = catalog.tables() + catalog.views()
    if table.endswith(":raw"):
        table = table[: -len(":raw")]
    elif f"{table}_export" in catalog.views():
        table = f"{table}_export"
    if table not in names:
        raise StageInputError(f"unknown table {table!r} (tables: {', '.join(names)})")
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise StageInputError(f"--out must end in .csv or .parquet, got {out.name!r}")
    df = pd.read_sql_query(f'SELECT * FROM "{table}"', catalog.con)
    with atomic_path(out, suffix=suffix) as tmp:  # an export: the user's umask
        if suffix == ".csv":
            df.to_csv(tmp, index=False)
        else:
            df.to_parquet(tmp, index=False)
    return len(df)


def _accepts(module: str, flag: str) -> bool:
    mod = importlib.import_module(module)
    builder = getattr(mod, "build_parser", None)
    if builder is None:
        return False
    return any(flag in a.option_strings for a in builder()._actions)


def run_stages(
    workdir: str | None,
    start: str | None,
    stop: str | None,
    forward: dict[str, str],
    stage_args: dict[str, list[str]],
) -> int:
    """Run the stages in order; returns the first non-zero exit code, else 0."""
    names = [n for n, _ in STAGES]
    for bound in (start, stop):
        if bound is not None and bound not in names:
            raise StageInputError(f"unknown stage {bound!r} (stages: {', '.join(names)})")
    i0 = names.index(start) if start else 0
    i1 = names.index(stop) if stop else len(names) - 1
    if i0 > i1:
        raise StageInputError(f"--from {names[i0]} comes after --to {names[i1]}: no stage to "
                              f"run (stages in order: {', '.join(names)})")
    chosen = names[i0 : i1 + 1]
    for name in stage_args:
        if name not in names:
            raise StageInputError(f"--stage-args names no stage: {name!r} (stages: "
                                  f"{', '.join(names)})")
        if name not in chosen:
            raise StageInputError(f"--stage-args {name}=...: stage {name} is not run "
                                  f"(--from/--to run {', '.join(chosen)})")
    for name, module in STAGES[i0 : i1 + 1]:
        argv = ["--workdir", workdir] if workdir else []
        for flag, value in forward.items():
            if value is not None and _accepts(module, flag):
                argv += [flag, value]
        argv += stage_args.get(name, [])
        report(f"[{name}] {command(module)} {shlex.join(argv)}")
        rc = importlib.import_module(module).main(argv)
        if rc:
            report(f"[{name}] exited with {rc}; stopping")
            return int(rc)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m builder", description=__doc__.split("\n\n")[0])
    add_workdir(p)
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure()

    def body() -> int:
        command = args.command or "status"
        if command == "run":
            extra: dict[str, list[str]] = {}
            for spec in args.stage_args:
                name, sep, rest = spec.partition("=")
                if not sep:
                    raise StageInputError(f"--stage-args wants STAGE=ARGS, got {spec!r}")
                extra.setdefault(name, []).extend(shlex.split(rest))
            forward = {"--llm": args.llm, "--embedder": args.embedder}
            return run_stages(args.workdir, args.start, args.stop, forward, extra)
        wd = WorkDir(resolve_workdir(args.workdir))
        # status and export only read: an existing catalog is opened read-only (works on a
        # read-only disk); a work dir without one is made, as by any first command
        readonly = wd.catalog_path.exists()
        if not readonly:
            wd.ensure()
        with Catalog(wd, readonly=readonly) as catalog:
            if command == "export":
                n = export_table(catalog, args.table, args.out)
                report(f"wrote {n} rows of {args.table} to {args.out}")
                return 0
            st = build_status(catalog)
            as_json = getattr(args, "json", False)
            report(json.dumps(st, indent=2) if as_json else format_status(st))
        return 0

    return cli_main(body)


if __name__ == "__main__":
    sys.exit(main())
