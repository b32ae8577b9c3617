"""``python -m benchmark reproduce``: the paper's suite, resumable, compared with the paper.

Exit code 0 when every job succeeded (or is up to date), 1 when any failed (the comparison is
written anyway), 2 on bad input (one line).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from benchmark.reproduce.plan import ReproduceConfig
from benchmark.reproduce.render import grouped
from benchmark.reproduce.run import format_summary
from benchmark.reproduce.suite import reproduce
from core.options import add_options, from_args


def add_parser(sub: Any) -> None:
    p = sub.add_parser("reproduce", help="run the paper's suite and compare with its tables",
                       description=__doc__.split("\n")[0].replace("``", ""))
    add_options(p, ReproduceConfig)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    cfg = from_args(ReproduceConfig, args)
    out = reproduce(cfg)
    if cfg.dry_run:
        print(out.dry_run)
        return 0
    if out.summary is not None:
        print(format_summary(out.summary))
    if out.comparison is not None:
        for s in out.comparison.sections:
            c = s.counts()
            print(f"{s.title}: {c['ok']} within, {c['outside']} outside, {c['missing']} missing")
    for key, path in out.written.items():
        print(f"{key}: {path}", file=sys.stderr)
    if not out.ok:
        failed = out.summary.failed if out.summary else []
        for jobs, why in grouped([(o.job.name, o.detail) for o in failed]):
            print(f"error: {', '.join(jobs)} failed: {why}", file=sys.stderr)
        return 1
    return 0
