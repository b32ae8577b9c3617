"""``python -m benchmark analyze``: silhouettes, SP correlations and UMAP for one model.

    python -m benchmark analyze --model MODEL --dataset PATH --output-dir DIR [--no-umap]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from benchmark.analysis import core
from benchmark.analysis.silhouette import EXPLORATORY_N, correlation_text
from benchmark.metrics.association import INFINITE
from benchmark.results import read_results
from benchmark.tasks.base import RunConfig, leaves_nothing_if_refused
from core.errors import DataError
from core.options import add_options, from_args

log = logging.getLogger(__name__)


def add_parser(sub: Any) -> None:
    """The ``analyze`` subcommand: the run flags and :class:`~core.AnalyzeConfig`'s."""
    p = sub.add_parser("analyze", help="silhouettes, SP correlations and UMAP for one model",
                       description=__doc__.split("\n")[0].replace("``", ""))
    seen: set[str] = set()
    add_options(p, RunConfig, seen=seen)
    add_options(p, core.AnalyzeConfig, seen=seen)
    p.set_defaults(handler=run)


def format_table(path: Path) -> str:
    """Per-country SP and silhouettes, then the correlations, as plain text."""
    r = read_results(path)
    s = r.scores

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    lines = [f"{r.model.name}: analysis of {r.task.dataset} (n={r.task.n})"]
    for metric in r.settings["metrics"]:
        lines.append(f"\nsilhouette ({metric})")
        lines.append(f"{'country':<8}{'lang':<6}{'SP':>7}{'text':>8}{'image':>8}{'sum':>8}")
        for code, row in s["by_country"].items():
            m = row["silhouette"][metric]
            sp = "∞" if row.get("SP_note") == INFINITE else f(row["SP"])
            lines.append(f"{code:<8}{row['language'] or '-':<6}{sp:>7}"
                         f"{f(m['text']):>8}{f(m['image']):>8}{f(m['sum']):>8}")
        for k, c in s["correlations"][metric].items():
            lines.append(f"SP vs {k}: {correlation_text(c)}")
    fam = next((c.get("holm_family") for m in s["correlations"].values() for c in m.values()),
               None)
    lines.append(f"r: Pearson, 95% CI by Fisher z; ρ: Spearman; p: Holm-adjusted over the "
                 f"model's {fam} tests; exploratory: fewer than {EXPLORATORY_N} pairs")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    cfg = from_args(core.AnalyzeConfig, args)
    if not cfg.dataset and not cfg.triplets_csv:
        raise DataError("analyze needs --dataset PATH_OR_HUB_ID or --triplets-csv FILE --images DIR")
    run_cfg = from_args(RunConfig, args)
    with leaves_nothing_if_refused(run_cfg.output_dir):
        path = core.analyze(run_cfg, cfg)
    if not run_cfg.quiet:
        print(format_table(path))
    print(f"analysis: {path}", file=sys.stderr)
    return 0
