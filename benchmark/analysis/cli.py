"""``python -m benchmark analyze``: silhouettes, SP correlations and UMAP for one model.

    python -m benchmark analyze --model MODEL --dataset PATH --output-dir DIR [--no-umap]

Reads the embeddings a ``3xcm`` run cached (same ``--cache-dir``) and embeds only what is
missing; writes ``DIR/<model-slug>/analysis.json`` and the UMAP PNG/parquet files beside it.
Bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from benchmark.analysis import core

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmark analyze",
                                description=__doc__.split("\n")[0].replace("``", ""))
    p.add_argument("--model", required=True, help="registered name, family:arg or module:Class")
    p.add_argument("--dataset", help="release folder or hub id ORG/NAME")
    p.add_argument("--revision", help="hub revision of --dataset")
    p.add_argument("--triplets-csv", type=Path,
                   help="the authors' triplet CSV instead of --dataset (needs --images)")
    p.add_argument("--images", type=Path, help="folder of <image_id>.<ext> (with --triplets-csv)")
    p.add_argument("--queries", type=Path, help="CSV concept,language,text of query texts")
    p.add_argument("--output-dir", type=Path, default=Path("results"),
                   help="writes OUTPUT_DIR/<model-slug>/analysis.json (default ./results)")
    p.add_argument("--cache-dir", type=Path,
                   help="embedding cache (default $XCM_CACHE_DIR or ~/.cache/xcm3)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    p.add_argument("--device", help="cpu / cuda / cuda:1 (default: cuda when present)")
    p.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], help="model dtype")
    p.add_argument("--batch-size", type=int, help="batch size for texts and images")
    p.add_argument("--bootstrap", type=int, default=1000,
                   help="bootstrap resamples of the SP intervals (default 1000, as 3xcm)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0, as 3xcm)")
    p.add_argument("-q", "--quiet", action="store_true", help="no table on stdout")
    core.add_arguments(p)
    return p


def format_table(path: Path) -> str:
    """Per-country SP and silhouettes, then the correlations, as plain text."""
    from benchmark.results import read_results

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
            lines.append(f"{code:<8}{row['language'] or '-':<6}{f(row['SP']):>7}"
                         f"{f(m['text']):>8}{f(m['image']):>8}{f(m['sum']):>8}")
        for k, c in s["correlations"][metric].items():
            lines.append(f"Pearson SP vs {k}: r={f(c['r'])} p={f(c['p'])} n={c['n']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchmark.data import DataError
    from benchmark.registry import RegistryError
    from benchmark.tables import TableError

    args = build_parser().parse_args(argv)
    if not args.dataset and not args.triplets_csv:
        print("error: analyze needs --dataset PATH_OR_HUB_ID or --triplets-csv FILE --images DIR",
              file=sys.stderr)
        return 2
    try:
        path = core.analyze(args)
    except (DataError, RegistryError, TableError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(format_table(path))
    print(f"analysis: {path}", file=sys.stderr)
    return 0
