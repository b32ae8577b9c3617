"""``python -m benchmark report``: leaderboard, figures and comparison with the authors.

    python -m benchmark report RESULTS_DIR_OR_FILE... --output DIR

Reads every results file (``<model-slug>/<task>.json``) under the given paths and writes
``DIR/leaderboard.md``, ``DIR/report.html`` (self-contained), ``DIR/figures/*.png`` and, for
models with published numbers, ``DIR/authors-comparison.{csv,md}``. Bad input is one line on
stderr and exit code 2 (``benchmark.cli``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from benchmark.report.build import build_report


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="leaderboard, figures and comparison with the authors",
                       description=__doc__.split("\n")[0].replace("``", ""))
    p.add_argument("results", nargs="+", type=Path,
                   help="results folders (searched recursively for *.json) or files")
    p.add_argument("--output", type=Path, required=True, help="folder to write the report to")
    p.add_argument("--title", default="3XCM report", help="title of the report")
    p.add_argument("--authors-dir", type=Path,
                   help="the authors' aggregated CSVs + model_names.csv "
                        "(default: data/authors_rq2)")
    p.add_argument("--no-authors", action="store_true",
                   help="leave out the comparison with the authors' numbers")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    written = build_report(args.results, args.output, args.authors_dir, not args.no_authors,
                           args.title)
    print((args.output / "leaderboard.md").read_text(encoding="utf-8").split("## Figures")[0])
    for key, path in written.items():
        print(f"{key}: {path}", file=sys.stderr)
    return 0
