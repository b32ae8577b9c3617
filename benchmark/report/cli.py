"""``python -m benchmark report``: leaderboard, figures and comparison with the authors;
``python -m benchmark compare A B``: a paired test of two results (report.compare)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from benchmark.report import compare, gallery
from benchmark.report.build import build_report
from benchmark.report.collect import ReportInputError
from core import files


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
    p.add_argument("--no-gallery", action="store_true",
                   help="leave out the galleries (gallery/: the triplets behind the scores)")
    p.add_argument("--gallery-dataset", type=Path, action="append", default=[],
                   help="local dataset folder (or image folder) for the galleries' thumbnails "
                        "(default: the dataset each run recorded); repeatable")
    p.add_argument("--gallery-page-size", type=int, default=gallery.DEFAULT_PAGE_SIZE,
                   help=f"items per gallery page (default {gallery.DEFAULT_PAGE_SIZE})")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.gallery_page_size < 1:
        raise ReportInputError(f"--gallery-page-size must be >= 1, got {args.gallery_page_size}")
    written = build_report(args.results, args.output, args.authors_dir, not args.no_authors,
                           args.title, not args.no_gallery, args.gallery_dataset,
                           args.gallery_page_size)
    print((args.output / "leaderboard.md").read_text(encoding="utf-8").split("## Figures")[0])
    for key, path in written.items():
        print(f"{key}: {path}", file=sys.stderr)
    return 0


def add_compare(sub: Any) -> None:
    p = sub.add_parser("compare", help="paired test of two models' results on the same data",
                       description=compare.__doc__.split("\n")[0].replace("``", ""))
    p.add_argument("result_a", type=Path, help="results file of model A (<model>/<task>.json)")
    p.add_argument("result_b", type=Path, help="results file of model B, same task and data")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise error rate of the stars (Holm over the rows shown; "
                        "default 0.05)")
    p.add_argument("--format", choices=["text", "md", "csv"], default="text",
                   help="text (default), md (a Markdown table for a paper) or csv")
    p.add_argument("--json", type=Path, default=None, help="also write the comparison here")
    p.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    if not 0 < args.alpha < 1:
        raise compare.CompareError(f"--alpha must be between 0 and 1, got {args.alpha}")
    if args.json:
        compare.check_json_target(args.json)
    c = compare.compare_results(args.result_a, args.result_b, args.alpha)
    fmt = {"text": compare.format_comparison, "md": compare.format_markdown,
           "csv": compare.format_csv}[args.format]
    print(fmt(c), end="" if args.format != "text" else "\n")
    if args.json:
        from benchmark.results import sanitize

        files.atomic_write_json(args.json, sanitize(c))
    return 0
