"""Benchmark: the default intervals of 10 models x 11,723 triplets from cached outcomes.

    .venv/bin/python tests/perf/bench_intervals.py [--models 10]

Writes, for 10 stand-in models, a ``3xcm.outcomes.parquet`` over the authors' 11,723 triplets
(their concepts and countries from data/authors/xcm-bench.csv; similarities drawn with a
concept effect), then times what scoring from those outcomes costs: reading each file and
computing every score with its default interval (cluster-robust over concepts: SP and
M_sem/M_cul/M_non with 95% intervals and detectable differences, overall and by country,
language and concept). The target is under 2 s for all 10 models, wall time on the
development machine; the script exits 1 when it is missed. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmark.metrics.association import association_scores  # noqa: E402
from core import datatables  # noqa: E402

TARGET_S = 2.0
SIMS = ["sim_semantic", "sim_cultural", "sim_non_relevant"]


def outcomes(tr: pd.DataFrame, seed: int) -> pd.DataFrame:
    """A model's outcomes over the authors' triplets: similarities with a concept effect."""
    rng = np.random.default_rng(seed)
    concepts, inv = np.unique(tr["query_concept"], return_inverse=True)
    effect = rng.normal(0, 0.3, (len(concepts), 3))[inv]
    sims = rng.normal(0, 1, (len(tr), 3)) + effect + [0.4, 0.2 * seed / 10, 0.0]
    df = pd.DataFrame({"triplet_id": tr.index.astype(str), "query_country": tr["code"],
                       "winner": sims.argmax(1).astype(np.int8),
                       "query_concept": tr["query_concept"]})
    for j, c in enumerate(SIMS):
        df[c] = sims[:, j]
    return df


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=10)
    args = ap.parse_args()
    tr = pd.read_csv(datatables.data_path("authors/xcm-bench.csv"))
    tr["code"] = [datatables.country(c).code for c in tr["query_country"]]
    lang = {c.code: c.language for c in datatables.countries()}
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for m in range(args.models):
            p = Path(tmp) / f"model{m}" / "3xcm.outcomes.parquet"
            p.parent.mkdir()
            outcomes(tr, m).to_parquet(p, index=False)
            paths.append(p)
        t0, c0 = time.perf_counter(), time.process_time()
        for p in paths:
            df = pd.read_parquet(p)
            country = df["query_country"].to_numpy()
            scores = association_scores(
                df[SIMS].to_numpy(), {"country": country,
                                      "language": np.array([lang[c] for c in country]),
                                      "concept": df["query_concept"].to_numpy()})
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    o = scores["overall"]
    cpu_model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text()
                      .splitlines() if ln.startswith("model name")), "unknown CPU")
    print(f"{args.models} models x {len(tr)} triplets ({tr['query_concept'].nunique()} concepts,"
          f" {tr['code'].nunique()} countries), default intervals: {wall:.2f} s wall, "
          f"{cpu:.2f} s CPU ({cpu_model})")
    print(f"last model: SP {o['SP']:.3f} {o['SP_ci95']}, {len(scores['by_concept'])} concepts, "
          f"{o['units']} units")
    ok = wall < TARGET_S
    print(("OK" if ok else "MISSED") + f": target {TARGET_S} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
